"""The PATH[:FACTORY] a user names on the command line: parsed and checked without importing anything."""

from __future__ import annotations

import os
from pathlib import Path

from compatcheck.errors import UsageError
from compatcheck.files import not_regular


def parse_target(target: str) -> tuple[Path, str]:
    """'models/x.py:make' -> (models/x.py, 'make'); the factory defaults to get_model."""
    path, sep, factory = target.rpartition(":")
    if not sep or not path.endswith(".py") or "/" in factory or not factory:
        return Path(target), "get_model"
    return Path(path), factory


def check_model_path(path: Path) -> None:
    """The checks the parent can make without importing anything."""
    try:
        kind = not_regular(os.stat(path).st_mode)  # a stat, never an open: a FIFO must not block
    except FileNotFoundError:
        raise UsageError(f"model file not found: {path}") from None
    except OSError as exc:
        raise UsageError(f"cannot read model file {path}: {exc.strerror}") from None
    if kind:
        raise UsageError(f"model path is {kind}, expected a .py file: {path}")
