"""`.item()` feeding a Python number back into the computation."""

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
    "jit_trace": "mismatch",
    "onnx_export": "pass",
    "onnxruntime": "pass",
}


class Normalize(nn.Module):
    def forward(self, x):
        peak = x.abs().max().item()
        return x / peak


def get_model():
    return Normalize().eval()


def get_inputs():
    return [torch.randn(2, 5), torch.randn(4, 5) * 100]
