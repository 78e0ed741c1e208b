"""A LayerNorm written out by hand after a residual add, over integer features that share a large offset
(timestamps in seconds, say, cast to float: every value and sum is exact in float32, so eager and the
graph as exported answer alike). onnxruntime's optimizer (onnxruntime 1.32) fuses the add and the
normalization into SkipLayerNormalization at ORT_ENABLE_EXTENDED, whose variance loses the digits the
unfused graph and eager keep: the default session answers otherwise, ORT_ENABLE_BASIC as eager does."""

import torch
from torch import nn


class ResidualNorm(nn.Module):
    def __init__(self, features: int = 64):
        super().__init__()
        self.weight = nn.Parameter(torch.ones(features))
        self.bias = nn.Parameter(torch.zeros(features))

    def forward(self, times, offsets):
        h = times.float() + offsets.float()
        mean = h.mean(-1, keepdim=True)
        variance = (h - mean).pow(2).mean(-1, keepdim=True)
        h = (h - mean) / torch.sqrt(variance + 1e-5)
        return self.weight * h + self.bias


def get_model():
    return ResidualNorm().eval()


def _seconds(batch: int, generator: torch.Generator) -> tuple[torch.Tensor, torch.Tensor]:
    times = 86_000 + torch.randint(-300, 300, (batch, 8, 64), generator=generator)
    return times, torch.randint(-300, 300, (batch, 8, 64), generator=generator)


def get_inputs():
    generator = torch.Generator().manual_seed(0)
    return [_seconds(2, generator), _seconds(3, generator)]
