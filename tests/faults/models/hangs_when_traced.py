"""Sleeps for an hour while torch.jit.trace runs: only --timeout gets the run past it."""

import time

import torch


class HangsWhenTraced(torch.nn.Module):
    def forward(self, x):
        if torch.jit.is_tracing():
            time.sleep(3600)
        return x + 1


def get_model():
    return HangsWhenTraced()


def get_inputs():
    return [torch.ones(2, 3), torch.ones(4, 3)]
