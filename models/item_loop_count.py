"""A loop count read with `.item()`: `range(int(steps.item()))` needs a number export cannot know."""

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
    "jit_trace": "mismatch",
    "onnx_export": "fail",
    "onnxruntime": "skip",
}

# The findings tests/test_findings.py asserts: stage, kind, op and the line they point at.
EXPECTED_FINDINGS = [
    {"stage": "export", "kind": "data-dependent-guard", "op": "for", "line": 33},
    {"stage": "jit_trace", "kind": "frozen-constant", "op": "for", "line": 33},
    {"stage": "onnx_export", "kind": "data-dependent-guard", "op": "for", "line": 33},
]


class Refine(nn.Module):
    def __init__(self):
        super().__init__()
        self.step = nn.Linear(4, 4)

    def forward(self, x, steps):  # steps: a 0-dim integer tensor
        for _ in range(int(steps.item())):
            x = x + 0.1 * torch.tanh(self.step(x))
        return x


def get_model():
    return Refine().eval()


def get_inputs():
    return [(torch.randn(2, 4), torch.tensor(2)), (torch.randn(3, 4), torch.tensor(5))]
