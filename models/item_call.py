"""`.item()` feeding a Python number back into the computation."""

import torch
from torch import nn


class Normalize(nn.Module):
    def forward(self, x):
        peak = x.abs().max().item()
        return x / peak


def get_model():
    return Normalize().eval()


def get_inputs():
    return [torch.randn(2, 5), torch.randn(4, 5) * 100]
