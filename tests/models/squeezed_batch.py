"""`.squeeze()` drops the batch dimension of a batch of one: a request of one sample gets another shape."""

import torch
from torch import nn

EXPECTED = {"eager": "pass"}
EXPECTED_FINDINGS = [{"stage": "eager", "kind": "batch-dependence", "line": "return self.proj(x).squeeze()",
                      "rewrite": False}]


class Scores(nn.Module):
    def __init__(self):
        super().__init__()
        self.proj = nn.Linear(8, 1)

    def forward(self, x):
        return self.proj(x).squeeze()


def get_model():
    return Scores().eval()


def get_inputs():
    return [torch.randn(3, 8), torch.randn(5, 8)]
