"""Single-head attention written with 3-D (batch, length, dim) tensors."""

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
    "onnx_export": "fail",
    "onnxruntime": "skip",
}

# The findings tests/test_findings.py asserts: stage, kind, op and the line they point at.
EXPECTED_FINDINGS = [
    {"stage": "onnx_export", "kind": "unsupported-op", "op": "aten.scaled_dot_product_attention", "line": 33},
]


class Attention(nn.Module):
    def __init__(self, width=8):
        super().__init__()
        self.qkv = nn.Linear(width, 3 * width)

    def forward(self, x):
        q, k, v = self.qkv(x).chunk(3, dim=-1)
        return F.scaled_dot_product_attention(q, k, v)


def get_model():
    return Attention().eval()


def get_inputs():
    return [torch.randn(2, 5, 8), torch.randn(3, 5, 8)]
