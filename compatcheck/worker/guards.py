"""What every phase of a stage runs inside: the deployer's recipe (no autograd), process-wide state
put back afterwards, and every warning recorded with the stack that raised it."""

from __future__ import annotations

import os
import traceback
import warnings
from contextlib import contextmanager

import torch


@contextmanager
def isolated_globals():
    """Undo what a stage or the model changes in process-wide state, so later stages do not inherit it."""
    saved = (torch.get_default_dtype(), torch.is_grad_enabled(), torch.get_num_threads(), os.getcwd())
    try:
        yield
    finally:
        dtype, grad, threads, cwd = saved
        torch.set_default_dtype(dtype)
        torch.set_grad_enabled(grad)
        if torch.get_num_threads() != threads:
            torch.set_num_threads(threads)
        os.chdir(cwd)


@contextmanager
def recording_warnings(into: list):
    """Record every warning with the Python stack at the moment it was raised."""
    with warnings.catch_warnings():
        warnings.simplefilter("always")

        def record(message, category, filename, lineno, file=None, line=None):
            into.append((warnings.WarningMessage(message, category, filename, lineno), traceback.extract_stack()))

        warnings.showwarning = record
        yield


@contextmanager
def guarded(into: list):
    """The deployer's recipe (eval mode, which the spec's copies are in, and no autograd), with the
    process-wide state put back and the warnings recorded `into`."""
    with isolated_globals(), recording_warnings(into), torch.no_grad():
        yield
