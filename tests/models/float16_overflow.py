"""A block whose inner activations pass float16's largest value, 65504 (a badly scaled projection); its
LayerNorm brings them back into range. In float16 the projection gives Inf and the norm NaN: the block
must stay float32. Input set 1 stays in range, input set 2 does not."""

import torch
from torch import nn


class Block(nn.Module):
    def __init__(self):
        super().__init__()
        self.up = nn.Linear(16, 64)
        self.norm = nn.LayerNorm(64)

    def forward(self, x):
        return self.norm(self.up(x))


class Overflowing(nn.Module):
    def __init__(self):
        super().__init__()
        self.embed = nn.Linear(8, 16)
        self.block = Block()
        self.head = nn.Linear(64, 4)
        with torch.no_grad():
            self.block.up.weight.mul_(20000.0)

    def forward(self, x):
        return self.head(self.block(self.embed(x)).relu())


def get_model():
    return Overflowing().eval()


def get_inputs():
    return [torch.randn(4, 8) * 4, torch.randn(6, 8) * 4]
