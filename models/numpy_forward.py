"""A numpy call inside forward: the values leave the graph."""

import numpy as np
import torch
from torch import nn

# The verdicts compatcheck must give on CPU (torch 2.13); tests/test_models.py asserts them.
EXPECTED = {
    "eager": "pass",
    "compile": "pass",
    "compile_fullgraph": "pass",
    "export": "fail",
    "aot_inductor": "skip",
    "jit_script": "fail",
    "jit_trace": "mismatch",
    "onnx_export": "pass",
    "onnxruntime": "pass",
}


class NumpyScale(nn.Module):
    def __init__(self):
        super().__init__()
        self.linear = nn.Linear(6, 6)

    def forward(self, x):
        y = self.linear(x)
        scale = np.sqrt(np.abs(y.detach().numpy()).mean())
        return y / torch.from_numpy(np.asarray(scale, dtype=np.float32))


def get_model():
    return NumpyScale().eval()


def get_inputs():
    return [torch.randn(2, 6), torch.randn(3, 6) * 10]
