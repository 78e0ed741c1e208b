"""Blocks that leave float16's range inside containers: an nn.ModuleList iterated in forward, an
nn.Sequential called as a whole and an nn.ModuleDict indexed by key. Each `Up` scales its values past
65504 and what comes after it brings them back: in the list and in the Sequential that is the next
block, so the two must stay float32 together (what passes between them too); in the dict it is the
LayerNorm of the same block, so that block alone stays float32."""

import torch
from torch import nn


class Block(nn.Module):
    """Linear, then LayerNorm: whatever comes in leaves normalized."""

    def __init__(self):
        super().__init__()
        self.lin = nn.Linear(16, 16)
        self.norm = nn.LayerNorm(16)

    def forward(self, x):
        return self.norm(self.lin(x))


class Up(nn.Module):
    """Linear, then scaled past float16's largest value."""

    def __init__(self):
        super().__init__()
        self.lin = nn.Linear(16, 16)

    def forward(self, x):
        return self.lin(x) * 1e5


class Mix(nn.Module):
    def __init__(self):
        super().__init__()
        self.up = Up()
        self.norm = nn.LayerNorm(16)

    def forward(self, x):
        return self.norm(self.up(x))


class Containers(nn.Module):
    def __init__(self):
        super().__init__()
        self.layers = nn.ModuleList([Block(), Up(), Block(), Block()])
        self.stack = nn.Sequential(Block(), Up(), Block())
        self.heads = nn.ModuleDict({"mix": Mix(), "out": nn.Linear(16, 4)})

    def forward(self, x):
        for layer in self.layers:
            x = layer(x)
        x = self.stack(x)
        return self.heads["out"](self.heads["mix"](x))


def get_model():
    return Containers().eval()


def get_inputs():
    return [torch.randn(4, 16), torch.randn(6, 16)]
