"""A Python counter on a nested block, bumped on every call and used in forward: eager's calls differ."""

import torch


class Block(torch.nn.Module):
    def __init__(self):
        super().__init__()
        self.count = 0

    def forward(self, x):
        self.count += 1
        return x * self.count


class Net(torch.nn.Module):
    def __init__(self):
        super().__init__()
        self.blocks = torch.nn.ModuleList([torch.nn.Identity(), Block()])

    def forward(self, x):
        for block in self.blocks:
            x = block(x)
        return x


def get_model():
    return Net()


def get_inputs():
    return [torch.randn(2, 3), torch.randn(2, 3)]
