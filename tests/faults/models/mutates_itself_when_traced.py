"""Changes itself while torch.jit.trace runs, then fails: a Python attribute cache, a registered buffer
written in place and a replaced submodule. The stages after it must get the model as get_model() built it."""

import torch
from torch import nn


class MutatesItselfWhenTraced(nn.Module):
    def __init__(self):
        super().__init__()
        self.fc = nn.Linear(4, 4)
        self.register_buffer("scale", torch.full((4,), 0.5))

    def forward(self, x):
        if torch.jit.is_tracing():
            self.cached = x.detach() * 100  # what a library's forward may keep for the next call
            self.scale.mul_(3)
            self.fc = nn.Linear(4, 4)
            raise RuntimeError("this model cannot be traced")
        out = self.fc(x) * self.scale
        cached = getattr(self, "cached", None)
        return out + cached.sum() if cached is not None else out


def get_model():
    return MutatesItselfWhenTraced()


def get_inputs():
    return [torch.randn(2, 4), torch.randn(3, 4)]
