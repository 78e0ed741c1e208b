"""A probit transform: uniform scores mapped to standard-normal ones with torch.erfinv."""

import math

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
    {"stage": "onnx_export", "kind": "unsupported-op", "op": "aten.erfinv", "line": 34},
]


class Probit(nn.Module):
    def __init__(self):
        super().__init__()
        self.linear = nn.Linear(6, 4)

    def forward(self, x):
        u = torch.sigmoid(self.linear(x))
        return math.sqrt(2.0) * torch.erfinv(2.0 * u - 1.0)


def get_model():
    return Probit().eval()


def get_inputs():
    return [torch.randn(2, 6), torch.randn(5, 6)]
