"""The mean over a sequence divided by int(x.shape[1]): int() makes the length the example's number."""

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
    "onnx_export": "pass",
    "onnxruntime": "pass",
}

# The findings tests/test_findings.py asserts: stage, kind, op and the line they point at.
EXPECTED_FINDINGS = [
    {"stage": "export", "kind": "dynamic-shape", "op": "int()", "line": 30},
    {"stage": "jit_trace", "kind": "dynamic-shape", "op": "int()", "line": 30},
]


class MeanPool(nn.Module):
    def forward(self, x):  # x: (batch, length, features)
        total = x.sum(dim=1)
        # the length as a Python number: export and trace keep input set 1's
        length = int(x.shape[1])
        return total / length


def get_model():
    return MeanPool().eval()


def get_inputs():
    return [torch.randn(2, 5, 4), torch.randn(3, 8, 4)]
