"""Features normalized with `h.norm(dim=-1)`: Python's default p=2 is no default in TorchScript."""

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
    "jit_trace": "pass",
    "onnx_export": "pass",
    "onnxruntime": "pass",
}

# The findings tests/test_findings.py asserts: stage, kind, op and the line they point at.
EXPECTED_FINDINGS = [
    {"stage": "jit_script", "kind": "script-signature", "op": "aten.norm", "line": 32},
]


class Normalized(nn.Module):
    def __init__(self):
        super().__init__()
        self.proj = nn.Linear(6, 4)

    def forward(self, x):
        h = self.proj(x)
        return h / h.norm(dim=-1, keepdim=True).clamp_min(1e-6)


def get_model():
    return Normalized().eval()


def get_inputs():
    return [torch.randn(2, 6), torch.randn(3, 6)]
