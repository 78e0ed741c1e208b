"""An `if` on a tensor's value whose input sets all take the same branch: a rewrite of both branches
cannot be proven by them."""

import torch
from torch import nn


class Gate(nn.Module):
    def __init__(self):
        super().__init__()
        self.linear = nn.Linear(4, 4)

    def forward(self, x):
        y = self.linear(x)
        if x.abs().sum() >= 0:  # always, for the input sets and every size the sweep draws
            return y * 2
        return -y


def get_model():
    return Gate().eval()


def get_inputs():
    return [(torch.rand(3, 4) + 0.1,), (torch.rand(5, 4) + 0.1,)]
