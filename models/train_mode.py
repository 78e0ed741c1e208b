"""BatchNorm and Dropout, returned in training mode: compatcheck evaluates in eval mode and says so."""

import torch
from torch import nn


def get_model():
    model = nn.Sequential(
        nn.Linear(8, 16),
        nn.BatchNorm1d(16),
        nn.ReLU(),
        nn.Dropout(0.5),
        nn.Linear(16, 4),
    )
    return model  # the pitfall: no .eval()


def get_inputs():
    return [torch.randn(4, 8), torch.randn(7, 8)]
