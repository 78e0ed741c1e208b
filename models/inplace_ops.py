"""In-place ops on a view of the input and on an intermediate."""

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


class InPlace(nn.Module):
    def __init__(self):
        super().__init__()
        self.linear = nn.Linear(8, 8)

    def forward(self, x):
        y = self.linear(x)
        y[:, 0] = 0.0
        y.relu_()
        y.add_(1.0)
        return y


def get_model():
    return InPlace().eval()


def get_inputs():
    return [torch.randn(2, 8), torch.randn(6, 8)]
