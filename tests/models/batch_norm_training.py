"""`F.batch_norm(..., training=True)`: normalised with the batch's statistics in eval mode too, so one
sample alone (a request of one) has none and raises; the rewrite uses the running ones in eval."""

import torch
import torch.nn.functional as F
from torch import nn

EXPECTED = {"eager": "pass"}
EXPECTED_FINDINGS = [{"stage": "eager", "kind": "batch-dependence",
                      "line": "return F.batch_norm(h, self.mean, self.var, training=True)", "rewrite": True}]


class Normalised(nn.Module):
    def __init__(self):
        super().__init__()
        self.proj = nn.Linear(8, 4)
        self.register_buffer("mean", torch.zeros(4))
        self.register_buffer("var", torch.ones(4))

    def forward(self, x):
        h = self.proj(x)
        return F.batch_norm(h, self.mean, self.var, training=True)


def get_model():
    return Normalised().eval()


def get_inputs():
    return [torch.randn(3, 8), torch.randn(5, 8)]
