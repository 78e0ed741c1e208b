"""A plain conv net with two batch sizes: every stage should pass, with a dynamic batch inferred."""

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


class ConvNet(nn.Module):
    def __init__(self):
        super().__init__()
        self.features = nn.Sequential(
            nn.Conv2d(3, 16, 3, padding=1), nn.BatchNorm2d(16), nn.ReLU(),
            nn.Conv2d(16, 32, 3, stride=2, padding=1), nn.ReLU(),
            nn.AdaptiveAvgPool2d(1), nn.Flatten(),
        )
        self.head = nn.Linear(32, 10)

    def forward(self, x):
        return self.head(self.features(x))


def get_model():
    return ConvNet().eval()


def get_inputs():
    return [(torch.randn(2, 3, 32, 32),), (torch.randn(5, 3, 32, 32),)]
