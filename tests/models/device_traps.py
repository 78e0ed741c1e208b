"""Device traps that pass on the CPU and fail on the first GPU request (tests/test_device.py), and the
same model written right (`correct`)."""

import torch
from torch import nn


class Traps(nn.Module):
    def __init__(self):
        super().__init__()
        self.linear = nn.Linear(4, 4)
        self.scale = torch.tensor([1.0, 2.0, 3.0, 4.0])

    def forward(self, x):
        pad = torch.zeros(x.shape[1])
        mask = torch.arange(x.shape[1]) < 2
        h = self.linear(x + pad).masked_fill(mask, 0.0) * self.scale
        if torch.cuda.is_available():
            h = h * 2
        return h.cpu() + 1


class Correct(nn.Module):
    def __init__(self):
        super().__init__()
        self.linear = nn.Linear(4, 4)
        self.register_buffer("scale", torch.tensor([1.0, 2.0, 3.0, 4.0]))

    def forward(self, x):
        pad = torch.zeros(x.shape[1], device=x.device)
        mask = torch.arange(x.shape[1], device=x.device) < 2
        return self.linear(x + pad).masked_fill(mask, 0.0) * self.scale * torch.tensor(1.0)


def get_model():
    return Traps().eval()


def correct():
    return Correct().eval()


def get_inputs():
    return [torch.randn(2, 4), torch.randn(3, 4)]
