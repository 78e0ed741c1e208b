"""Majority vote of an ensemble: torch.mode over the members' predicted classes."""

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
    {"stage": "onnx_export", "kind": "unsupported-op", "op": "aten.mode", "line": 32},
]


class Vote(nn.Module):
    def __init__(self):
        super().__init__()
        self.members = nn.Linear(6, 5 * 4)  # five members, four classes each

    def forward(self, x):
        votes = self.members(x).unflatten(-1, (5, 4)).argmax(-1)
        return torch.mode(votes, dim=1).values


def get_model():
    return Vote().eval()


def get_inputs():
    return [torch.randn(3, 6), torch.randn(6, 6)]
