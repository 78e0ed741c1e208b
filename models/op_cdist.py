"""A prototype classifier: logits are negative distances to learned prototypes, with torch.cdist."""

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
    {"stage": "onnx_export", "kind": "unsupported-op", "op": "aten._cdist_forward", "line": 32},
]


class Prototypes(nn.Module):
    def __init__(self):
        super().__init__()
        self.embed = nn.Linear(6, 4)
        self.prototypes = nn.Parameter(torch.randn(3, 4))

    def forward(self, x):
        return -torch.cdist(self.embed(x), self.prototypes)


def get_model():
    return Prototypes().eval()


def get_inputs():
    return [torch.randn(2, 6), torch.randn(5, 6)]
