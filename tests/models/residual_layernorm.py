"""A LayerNorm written out by hand after a residual add, on features that share a large offset (raw
positions or timestamps, say): onnxruntime's optimizer (torch 2.13, onnxruntime 1.32) fuses the add and
the normalization into SkipLayerNormalization at ORT_ENABLE_EXTENDED, whose variance loses the digits the
unfused graph and eager keep. The values lie on a grid of 1/256, so every sum is exact in float32."""

import torch
from torch import nn


class ResidualNorm(nn.Module):
    def __init__(self, features: int = 64):
        super().__init__()
        self.weight = nn.Parameter(torch.ones(features))
        self.bias = nn.Parameter(torch.zeros(features))

    def forward(self, x, residual):
        h = x + residual
        mean = h.mean(-1, keepdim=True)
        variance = (h - mean).pow(2).mean(-1, keepdim=True)
        h = (h - mean) / torch.sqrt(variance + 1e-5)
        return self.weight * h + self.bias


def get_model():
    return ResidualNorm().eval()


def _features(batch: int) -> torch.Tensor:
    return torch.randint(-64, 64, (batch, 8, 64)) / 256.0 + 1000.0


def get_inputs():
    torch.manual_seed(0)
    return [(_features(2), torch.randint(-64, 64, (2, 8, 64)) / 256.0),
            (_features(3), torch.randint(-64, 64, (3, 8, 64)) / 256.0)]
