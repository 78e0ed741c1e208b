"""Doubles its input in place before using it: every run must see the input as get_inputs() made it."""

import torch


class MutatesInput(torch.nn.Module):
    def forward(self, x):
        x.mul_(2)
        return x + 1


def get_model():
    return MutatesInput()


def get_inputs():
    return [torch.randn(3, 4), torch.randn(5, 4)]
