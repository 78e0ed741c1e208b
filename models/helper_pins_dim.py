"""A helper builds a causal mask in Python from int(x.size(1)): export pins the length the input sets vary."""

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
    "jit_trace": "fail",
    "onnx_export": "fail",
    "onnxruntime": "skip",
}

# The findings tests/test_findings.py asserts: stage, kind, op and the line they point at.
EXPECTED_FINDINGS = [
    {"stage": "export", "kind": "dynamic-shape", "op": "int()", "line": 29},
    {"stage": "jit_trace", "kind": "dynamic-shape", "op": "int()", "line": 29},
    {"stage": "onnx_export", "kind": "dynamic-shape", "op": "int()", "line": 29},
]


def causal_mask(x):
    """1.0 where position i may look at position j (j <= i), else 0.0."""
    n = int(x.size(1))
    return torch.tensor([[float(j <= i) for j in range(n)] for i in range(n)])


class CausalMean(nn.Module):
    def forward(self, x):  # x: (batch, length, features): the mean of each prefix
        mask = causal_mask(x)
        return mask @ x / mask.sum(1, keepdim=True)


def get_model():
    return CausalMean().eval()


def get_inputs():
    return [torch.randn(2, 6, 4), torch.randn(2, 9, 4)]
