"""A straight-through rounding estimator written as a torch.autograd.Function."""

import torch
from torch import nn

# The verdicts compatcheck must give on CPU (torch 2.13); tests/test_models.py asserts them.
EXPECTED = {
    "eager": "pass",
    "compile": "pass",
    "compile_fullgraph": "pass",
    "export": "pass",
    "aot_inductor": "pass",
    "jit_script": "fail",
    "jit_trace": "fail",
    "onnx_export": "pass",
    "onnxruntime": "pass",
}

# The findings tests/test_findings.py asserts: stage, kind, op and the line they point at.
EXPECTED_FINDINGS = [
    {"stage": "jit_script", "kind": "unsupported-python", "op": "torch.autograd.Function", "line": 43},
    {"stage": "jit_trace", "kind": "unsupported-python", "op": "torch.autograd.Function", "line": 43},
]


class RoundSTE(torch.autograd.Function):
    @staticmethod
    def forward(ctx, x):
        return torch.round(x)

    @staticmethod
    def backward(ctx, grad):
        return grad


class Quantize(nn.Module):
    def __init__(self):
        super().__init__()
        self.linear = nn.Linear(6, 6)

    def forward(self, x):
        y = self.linear(x) * 4
        return RoundSTE.apply(y) / 4


def get_model():
    return Quantize().eval()


def get_inputs():
    return [torch.randn(2, 6), torch.randn(5, 6)]
