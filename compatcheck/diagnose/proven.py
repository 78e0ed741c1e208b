"""Findings of the recipe phase: a recipe proven to make the stage pass (`passes-with`, with the call
its build ran), or one only the model's factory can set, so not checked."""

from __future__ import annotations

from compatcheck.diagnose.found import plain
from compatcheck.report.model import Finding


def proven_recipe(stage: str, what: str, call: str | None) -> Finding:
    return plain(stage, "passes-with", f"{stage} passes with {what}, checked on every input set", op=what,
                 rewrite=call)


def factory_only(stage: str, what: str, factory: str) -> Finding:
    return plain(stage, "passes-with", f"not checked: needs a change in your factory: build the model with {factory} "
                 f"({what}); the built model offers no way to switch it afterwards", op=what)
