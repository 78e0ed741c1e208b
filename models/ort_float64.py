"""A float64 model: onnxruntime's CPU provider has Conv and Erf kernels for float32 only."""

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
    "onnx_export": "pass",
    "onnxruntime": "fail",
}

# The findings tests/test_findings.py asserts: stage, kind, op and the line they point at.
EXPECTED_FINDINGS = [
    {"stage": "onnxruntime", "kind": "missing-kernel", "op": "Conv", "line": 33},
    {"stage": "onnxruntime", "kind": "missing-kernel", "op": "Gelu", "line": 34},
]


class Smoother(nn.Module):
    def __init__(self):
        super().__init__()
        self.conv = nn.Conv1d(2, 4, 3, padding=1)
        self.act = nn.GELU()

    def forward(self, x):
        h = self.conv(x)
        return self.act(h)


def get_model():
    return Smoother().double().eval()


def get_inputs():
    return [torch.randn(2, 2, 16, dtype=torch.float64), torch.randn(3, 2, 16, dtype=torch.float64)]
