"""A loop over an nn.ModuleList with a residual: every stage should handle it."""

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
    "onnxruntime": "pass",
}


class Residual(nn.Module):
    def __init__(self, width=16, depth=4):
        super().__init__()
        self.blocks = nn.ModuleList(nn.Sequential(nn.Linear(width, width), nn.GELU()) for _ in range(depth))
        self.norm = nn.LayerNorm(width)

    def forward(self, x):
        for block in self.blocks:
            x = x + block(x)
        return self.norm(x)


def get_model():
    return Residual().eval()


def get_inputs():
    return [torch.randn(2, 5, 16), torch.randn(3, 9, 16)]
