"""Forks a helper at import (it inherits every open file), then crashes while torch.jit.trace runs."""

import os
import time

import torch

if os.fork() == 0:
    time.sleep(300)
    os._exit(0)


class CrashesWhenTraced(torch.nn.Module):
    def forward(self, x):
        if torch.jit.is_tracing():
            os._exit(3)
        return x * 2


def get_model():
    return CrashesWhenTraced()


def get_inputs():
    return torch.ones(2, 3)
