"""Centred with the batch's own mean: each answer depends on the samples it is batched with, so a
server's dynamic batcher, packing requests from different users, changes them."""

import torch
from torch import nn

EXPECTED = {"eager": "pass"}
EXPECTED_FINDINGS = [{"stage": "eager", "kind": "batch-dependence", "line": "return h - h.mean(dim=0, keepdim=True)",
                      "rewrite": False}]


class CentredOverBatch(nn.Module):
    def __init__(self):
        super().__init__()
        self.proj = nn.Linear(8, 4)

    def forward(self, x):
        h = self.proj(x)
        return h - h.mean(dim=0, keepdim=True)


def get_model():
    return CentredOverBatch().eval()


def get_inputs():
    return [torch.randn(3, 8), torch.randn(5, 8)]
