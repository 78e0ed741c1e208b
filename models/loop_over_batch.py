"""Per-sample normalization as a Python loop over the batch: export unrolls it for the example's batch."""

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
    {"stage": "export", "kind": "dynamic-shape", "op": "for", "line": 34},
    {"stage": "jit_trace", "kind": "dynamic-shape", "op": "for", "line": 34},
    {"stage": "onnx_export", "kind": "dynamic-shape", "op": "for", "line": 34},
]


class PerSampleNorm(nn.Module):
    def __init__(self):
        super().__init__()
        self.proj = nn.Linear(8, 4)

    def forward(self, x):
        rows = []
        for i in range(x.shape[0]):
            row = x[i]
            rows.append((row - row.mean()) / (row.std() + 1e-5))
        return self.proj(torch.stack(rows))


def get_model():
    return PerSampleNorm().eval()


def get_inputs():
    return [torch.randn(2, 8), torch.randn(5, 8)]
