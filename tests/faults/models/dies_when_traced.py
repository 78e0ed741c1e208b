"""Kills its own process with the signal named in FAULT_TEST_SIGNAL while torch.jit.trace runs."""

import os
import signal

import torch


class DiesWhenTraced(torch.nn.Module):
    def forward(self, x):
        if torch.jit.is_tracing():
            os.kill(os.getpid(), getattr(signal, os.environ.get("FAULT_TEST_SIGNAL", "SIGSEGV")))
        return x * 2


def get_model():
    return DiesWhenTraced()


def get_inputs():
    return [torch.ones(2, 3), torch.ones(4, 3)]
