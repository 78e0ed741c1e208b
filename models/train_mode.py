"""BatchNorm and Dropout, returned in training mode: compatcheck evaluates in eval mode and says so."""

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


def get_model():
    model = nn.Sequential(
        nn.Linear(8, 16),
        nn.BatchNorm1d(16),
        nn.ReLU(),
        nn.Dropout(0.5),
        nn.Linear(16, 4),
    )
    return model  # the pitfall: no .eval()


def get_inputs():
    return [torch.randn(4, 8), torch.randn(7, 8)]
