"""Hangs under torch.jit.trace while COMPATCHECK_TEST_HANG is set: a run to interrupt, then resume."""

import os
import time

import torch


class HangsIfAsked(torch.nn.Module):
    def forward(self, x):
        if torch.jit.is_tracing() and os.environ.get("COMPATCHECK_TEST_HANG"):
            time.sleep(3600)
        return x - 1


def get_model():
    return HangsIfAsked()


def get_inputs():
    return [torch.ones(2, 3), torch.ones(4, 3)]
