"""A helper that reads a size with int(x.size(1)) to build a tensor: export pins the sequence
length to the example's, although the input sets vary it."""

import torch
from torch import nn

# The verdicts compatcheck must give on CPU (torch 2.13); tests/test_models.py asserts them.
EXPECTED = {
    "eager": "pass",
    "compile": "pass",
    "compile_fullgraph": "pass",
    "export": "fail",
    "aot_inductor": "skip",
    "jit_script": "pass",
    "jit_trace": "pass",
    "onnx_export": "fail",
    "onnxruntime": "skip",
}

# The findings tests/test_findings.py asserts: stage, kind, op and the line they point at.
EXPECTED_FINDINGS = [
    {"stage": "export", "kind": "dynamic-shape", "op": "int()", "line": 29},
    {"stage": "onnx_export", "kind": "dynamic-shape", "op": "int()", "line": 29},
]


def positions(x):
    """Positions 0..n-1 along the sequence, as floats scaled to [0, 1)."""
    n = int(x.size(1))
    return torch.arange(n, dtype=x.dtype) / n


class AddPosition(nn.Module):
    def __init__(self):
        super().__init__()
        self.scale = nn.Parameter(torch.tensor(0.5))

    def forward(self, x):  # x: (batch, length, features)
        return x + self.scale * positions(x)[None, :, None]


def get_model():
    return AddPosition().eval()


def get_inputs():
    return [torch.randn(2, 6, 4), torch.randn(2, 9, 4)]
