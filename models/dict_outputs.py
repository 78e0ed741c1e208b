"""A model returning a dict: jit.trace refuses it unless strict=False."""

import torch
from torch import nn


class TwoHeads(nn.Module):
    def __init__(self):
        super().__init__()
        self.body = nn.Linear(8, 8)
        self.cls = nn.Linear(8, 3)
        self.box = nn.Linear(8, 4)

    def forward(self, x):
        h = torch.relu(self.body(x))
        return {"logits": self.cls(h), "boxes": self.box(h).sigmoid()}


def get_model():
    return TwoHeads().eval()


def get_inputs():
    return [torch.randn(2, 8), torch.randn(4, 8)]
