"""Attention with a key mask that hides every key of one sample (an empty sequence in the batch)."""

import torch
from torch import nn
from torch.nn import functional as F

# The verdicts compatcheck must give on CPU (torch 2.13); tests/test_models.py asserts them.
EXPECTED = {
    "eager": "pass",
    "compile": "pass",
    "compile_fullgraph": "pass",
    "export": "pass",
    "aot_inductor": "pass",
    "jit_script": "pass",
    "jit_trace": "pass",
    "onnx_export": "pass",
    "onnxruntime": "mismatch",
}

# The findings tests/test_findings.py asserts: stage, kind, op and the line they point at.
EXPECTED_FINDINGS = [
    {"stage": "onnxruntime", "kind": "export-divergence", "op": "aten.scaled_dot_product_attention", "line": 39},
]


class Attention(nn.Module):
    def __init__(self, width=8, heads=2):
        super().__init__()
        self.heads = heads
        self.qkv = nn.Linear(width, 3 * width)
        self.out = nn.Linear(width, width)

    def split(self, t):
        return t.unflatten(-1, (self.heads, -1)).transpose(1, 2)

    def forward(self, x, keep):
        q, k, v = self.qkv(x).chunk(3, dim=-1)
        mask = keep[:, None, None, :]
        y = F.scaled_dot_product_attention(self.split(q), self.split(k), self.split(v), attn_mask=mask)
        return self.out(y.transpose(1, 2).flatten(2))


def get_model():
    return Attention().eval()


def _inputs(batch, length=5):
    keep = torch.ones(batch, length, dtype=torch.bool)
    keep[-1] = False  # the last sample is all padding
    return torch.randn(batch, length, 8), keep


def get_inputs():
    return [_inputs(2), _inputs(3)]
