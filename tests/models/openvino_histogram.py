"""A histogram of each row's values (torch.histc): OpenVINO's PyTorch frontend (2026.4) has no conversion
for aten::histc, so the OpenVINO stage fails at conversion and the finding points at the line."""

import torch
from torch import nn


class RowHistogram(nn.Module):
    def __init__(self):
        super().__init__()
        self.proj = nn.Linear(8, 8)

    def forward(self, x):
        counts = torch.histc(self.proj(x), bins=4, min=-2.0, max=2.0)
        return x.sum(-1) + counts.sum()


def get_model():
    torch.manual_seed(0)
    return RowHistogram().eval()


def get_inputs():
    torch.manual_seed(0)
    return [torch.randn(2, 8), torch.randn(3, 8)]
