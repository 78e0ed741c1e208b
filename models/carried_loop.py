"""A leaky integrator over time: each step reads the state the step before wrote, a Python loop over a
dimension the input sets vary (the sequence length)."""

import torch
from torch import nn

# The verdicts compatcheck must give on CPU (torch 2.13); tests/test_models.py asserts them. The loop's
# finding offers no batching rewrite: its steps depend on each other (diagnose/loops.py).
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
    {"stage": "export", "kind": "dynamic-shape", "op": "for-carried", "line": 37},
    {"stage": "jit_trace", "kind": "dynamic-shape", "op": "for-carried", "line": 37},
    {"stage": "onnx_export", "kind": "dynamic-shape", "op": "for-carried", "line": 37},
]

class LeakyIntegrator(nn.Module):
    def __init__(self):
        super().__init__()
        self.proj = nn.Linear(6, 4)
        self.decay = 0.9

    def forward(self, x):
        h = self.proj(x)
        acc = torch.zeros_like(h[:, 0])
        for t in range(h.shape[1]):
            acc = self.decay * acc + h[:, t]
        return acc


def get_model():
    return LeakyIntegrator().eval()


def get_inputs():
    return [torch.randn(2, 5, 6), torch.randn(3, 7, 6)]
