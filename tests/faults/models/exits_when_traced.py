"""Calls os._exit(3) while torch.jit.trace runs: the worker vanishes without a signal."""

import os

import torch


class ExitsWhenTraced(torch.nn.Module):
    def forward(self, x):
        if torch.jit.is_tracing():
            os._exit(3)
        return x * 2


def get_model():
    return ExitsWhenTraced()


def get_inputs():
    return [torch.ones(2, 3), torch.ones(4, 3)]
