"""The PATH[:FACTORY] a user names on the command line: parsed and checked without importing anything."""

from __future__ import annotations

from pathlib import Path

from compatcheck.errors import UsageError


def parse_target(target: str) -> tuple[Path, str]:
    """'models/x.py:make' -> (models/x.py, 'make'); the factory defaults to get_model."""
    path, sep, factory = target.rpartition(":")
    if not sep or not path.endswith(".py") or "/" in factory or not factory:
        return Path(target), "get_model"
    return Path(path), factory


def check_model_path(path: Path) -> None:
    """The checks the parent can make without importing anything."""
    if not path.exists():
        raise UsageError(f"model file not found: {path}")
    if path.is_dir():
        raise UsageError(f"model path is a directory, expected a .py file: {path}")
