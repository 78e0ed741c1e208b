"""Hangs under torch.jit.trace while FAULT_TEST_HANG names a file, which it creates first so a test
knows the stage is under way: a run to interrupt, then resume."""

import os
import time
from pathlib import Path

import torch


class HangsIfAsked(torch.nn.Module):
    def forward(self, x):
        if torch.jit.is_tracing() and os.environ.get("FAULT_TEST_HANG"):
            Path(os.environ["FAULT_TEST_HANG"]).touch()
            time.sleep(3600)
        return x - 1


def get_model():
    return HangsIfAsked()


def get_inputs():
    return [torch.ones(2, 3), torch.ones(4, 3)]
