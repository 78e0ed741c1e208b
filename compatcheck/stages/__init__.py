"""One module per stage; the table that orders them is compatcheck/ladder.py."""

from __future__ import annotations


def load(name: str):
    """The stage named `name`, built from its row of the ladder (imported here, in the worker)."""
    import importlib

    from compatcheck.ladder import BY_NAME

    module, _, cls = BY_NAME[name].target.partition(":")
    return getattr(importlib.import_module(module), cls)()
