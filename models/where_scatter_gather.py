"""torch.where on a bool mask, scatter_add and gather, with integer index inputs."""

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
    "openvino": "pass",
}


class Routing(nn.Module):
    def forward(self, x, index):
        picked = torch.gather(x, 1, index)
        pooled = torch.zeros(x.shape[0], 4).scatter_add(1, index, picked)
        return torch.where(pooled > 0, pooled, torch.zeros_like(pooled))


def get_model():
    return Routing().eval()


def get_inputs():
    return [(torch.randn(2, 6), torch.randint(0, 4, (2, 3))), (torch.randn(5, 6), torch.randint(0, 4, (5, 3)))]
