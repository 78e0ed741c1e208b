"""The package's imports against its layers (compatcheck/layers.py): each import points down or within its
layer, and no modules import each other in a loop. Every import counts, function-level ones too; only
those under `if TYPE_CHECKING:` are exempt."""

import ast
from pathlib import Path

import pytest

from compatcheck.layers import LAYERS, layer_of
from tests.conftest import ROOT

PACKAGE = ROOT / "compatcheck"


def module_name(path: Path) -> str:
    parts = list(path.relative_to(ROOT).with_suffix("").parts)
    return ".".join(parts[:-1] if parts[-1] == "__init__" else parts)


MODULES = {module_name(path): path for path in PACKAGE.rglob("*.py")}


def imports(text: str, source: str, is_package: bool = False) -> set[str]:
    """The compatcheck modules that the code `text` of module `source` imports, anywhere in it."""
    found = set()

    def visit(node, exempt):
        if isinstance(node, ast.If) and "TYPE_CHECKING" in ast.unparse(node.test):
            exempt = True
        if isinstance(node, ast.Import) and not exempt:
            found.update(alias.name for alias in node.names)
        elif isinstance(node, ast.ImportFrom) and not exempt:
            base = node.module or ""
            if node.level:
                package = source.split(".")[: len(source.split(".")) - node.level + is_package]
                base = ".".join([*package, *([node.module] if node.module else [])])
            found.update(f"{base}.{alias.name}" if f"{base}.{alias.name}" in MODULES else base for alias in node.names)
        for child in ast.iter_child_nodes(node):
            visit(child, exempt)

    visit(ast.parse(text), False)
    return {name for name in found if name.split(".")[0] == "compatcheck" and name != source}


GRAPH = {name: imports(path.read_text(), name, path.name == "__init__.py") for name, path in MODULES.items()}


def upward(graph: dict[str, set[str]]) -> list[str]:
    return [f"{source} ({LAYERS[layer_of(source)][0]}) imports {target} ({LAYERS[layer_of(target)][0]})"
            for source, targets in sorted(graph.items()) for target in sorted(targets)
            if layer_of(target) < layer_of(source)]


def loops(graph: dict[str, set[str]]) -> list[str]:
    state: dict[str, str] = {}
    found = []

    def walk(name, trail):
        state[name] = "open"
        for target in sorted(graph.get(name, ())):
            if state.get(target) == "open":
                found.append(" -> ".join([*trail[trail.index(target):], target]))
            elif target not in state:
                walk(target, [*trail, target])
        state[name] = "done"

    for name in sorted(graph):
        if name not in state:
            walk(name, [name])
    return found


def test_every_module_is_in_a_layer():
    for name in MODULES:
        layer_of(name)


def test_imports_never_point_up():
    assert upward(GRAPH) == []


def test_no_modules_import_each_other_in_a_loop():
    assert loops(GRAPH) == []


def test_an_upward_import_and_a_loop_are_caught():
    planted = {**GRAPH, "compatcheck.report.console": {"compatcheck.session.run"},
               "compatcheck.errors": {"compatcheck.files"}, "compatcheck.files": {"compatcheck.errors"}}
    assert upward(planted) == ["compatcheck.report.console (report) imports compatcheck.session.run (session)"]
    assert loops(planted) == ["compatcheck.errors -> compatcheck.files -> compatcheck.errors"]


@pytest.mark.parametrize("text, expected", [
    ("from compatcheck.session.run import execute\n", {"compatcheck.session.run"}),
    ("def f():\n    from compatcheck import ladder\n", {"compatcheck.ladder"}),
    ("from . import console\nfrom .model import Report\n", {"compatcheck.report.console", "compatcheck.report.model"}),
    ("from typing import TYPE_CHECKING\nif TYPE_CHECKING:\n    from compatcheck.cli import app\n", set()),
])
def test_the_reader_sees_function_level_and_relative_imports_and_exempts_type_checking(text, expected):
    assert imports(text, "compatcheck.report.markdown") == expected
