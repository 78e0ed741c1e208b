"""How pytest-xdist shares the suite out among its workers. A test module that defines a module- or
session-scoped fixture (the runs of a corpus of models, a Triton server) is one unit of work, so one
worker makes that fixture once; every other test is a unit of its own, and the larger units go first.

xdist's own grouping (`--dist loadgroup` with `xdist_group` marks) does not reach its scheduler with
pytest 9.2, whose node ids xdist can no longer rename (pytest-dev/pytest-xdist#1386): the scheduler
here needs nothing from the workers but the node ids."""

from __future__ import annotations

import ast
import functools
from pathlib import Path

import pytest


@functools.cache
def shares_a_fixture(module: Path) -> bool:
    """Whether a module's source defines a module- or session-scoped fixture."""
    if module.suffix != ".py" or not module.is_file():
        return False
    for node in ast.parse(module.read_text()).body:
        for decorator in getattr(node, "decorator_list", []):
            scope = {k.arg: k.value for k in getattr(decorator, "keywords", [])}.get("scope")
            if isinstance(scope, ast.Constant) and scope.value in ("module", "session"):
                return True
    return False


@pytest.hookimpl(optionalhook=True)
def pytest_xdist_make_scheduler(config, log):
    """xdist's scope scheduler, whose scope is the module where a module shares a fixture, else the test."""
    from xdist.scheduler import LoadScopeScheduling

    class SharedFixtureModules(LoadScopeScheduling):
        def _split_scope(self, nodeid: str) -> str:
            module = nodeid.split("::", 1)[0]
            return module if shares_a_fixture(Path(self.config.rootpath) / module) else nodeid

    return SharedFixtureModules(config, log)
