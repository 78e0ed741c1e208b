"""Bucketize a feature into fixed bins with torch.searchsorted, then embed the bucket."""

import torch
from torch import nn

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
    {"stage": "onnx_export", "kind": "unsupported-op", "op": "aten.searchsorted.Tensor", "line": 32},
]


class Buckets(nn.Module):
    def __init__(self):
        super().__init__()
        self.register_buffer("edges", torch.linspace(-2.0, 2.0, 15))
        self.embed = nn.Embedding(16, 8)

    def forward(self, x):
        bucket = torch.searchsorted(self.edges, x.contiguous())
        return self.embed(bucket).sum(1)


def get_model():
    return Buckets().eval()


def get_inputs():
    return [torch.randn(2, 6), torch.randn(5, 6)]
