"""Starts a child in a new session (out of the worker's process group) in forward, then hangs in
torch.jit.trace when FAULT_TEST_HANG names a file, which it creates first."""

import os
import subprocess
import sys
import time
from pathlib import Path

import torch

started = []


class SpawnsChild(torch.nn.Module):
    def forward(self, x):
        if not started:
            started.append(subprocess.Popen([sys.executable, "-c", "import time; time.sleep(600)"],
                                            start_new_session=True))
        if torch.jit.is_tracing() and os.environ.get("FAULT_TEST_HANG"):
            Path(os.environ["FAULT_TEST_HANG"]).touch()
            time.sleep(600)
        return x * 2


def get_model():
    return SpawnsChild()


def get_inputs():
    return torch.ones(2, 3)
