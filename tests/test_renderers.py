"""Every renderer takes every report the schema allows, and every report the suite produces: the console
table, the Markdown checklist, JUnit, the GitHub annotations and the latency chart. A renderer that
formats an optional field as a number crashes on the report whose field is None, after a run that may
have taken minutes; and a renderer that does crash loses none of the other outputs."""

from __future__ import annotations

import io
import os
import json
import types
import typing
from enum import Enum
from pathlib import Path

import pytest
from pydantic import BaseModel
from rich.console import Console

from compatcheck.report.chart import latency_svg
from compatcheck.report.ci import github_annotations, junit
from compatcheck.report.console import render
from compatcheck.report.markdown import checklist
from compatcheck.report.model import Report, load_report
from compatcheck.report.routes import summarize
from tests.conftest import REAL_PYTHON, run_cli
from tests.shared_runs import EXAMPLE_FILES, REAL_FILES

DATA = Path(__file__).parent / "data"


def render_all(report: Report) -> dict[str, str]:
    """Every renderer's text of a report, as the command line calls them."""
    console = Console(file=io.StringIO(), width=200)
    render(report, console)
    return {"console": console.file.getvalue(), "checklist": checklist(report), "junit": junit(report),
            "annotations": "\n".join(github_annotations(report)), "chart": latency_svg(report) or ""}


def _value(annotation, none: set, empty: bool):
    """A value of the type `annotation`: None for an optional type where `none` holds its model's field
    (or holds everything), an empty list or dict where `empty`, else one of each."""
    origin, args = typing.get_origin(annotation), typing.get_args(annotation)
    if origin in (typing.Union, types.UnionType):
        return _value(next(arg for arg in args if arg is not type(None)), none, empty)
    if origin is typing.Literal:
        return args[0]
    if origin is list:
        return [] if empty else [_value(args[0], none, empty)]
    if origin is dict or annotation is dict:
        key, value = args or (str, str)
        return {} if empty else {_value(key, none, empty): _value(value, none, empty)}
    if isinstance(annotation, type) and issubclass(annotation, BaseModel):
        return filled(annotation, none, empty)
    if isinstance(annotation, type) and issubclass(annotation, Enum):
        return next(iter(annotation))
    return {str: "x", int: 1, float: 0.5, bool: True}[annotation]


def filled(cls: type[BaseModel], none: set = frozenset(), empty: bool = False) -> BaseModel:
    """An instance of `cls` with every field given: those named in `none` ((model, field) pairs, or
    "all") None where the type allows it."""
    values = {}
    for name, field in cls.model_fields.items():
        optional = type(None) in typing.get_args(field.annotation)
        if optional and ("all" in none or (cls, name) in none):
            values[name] = None
        else:
            values[name] = _value(field.annotation, none, empty)
    return cls(**values)


def _models(cls: type[BaseModel], seen: set) -> set:
    """`cls` and every model its fields hold."""
    seen.add(cls)
    for field in cls.model_fields.values():
        for inner in typing.get_args(field.annotation) + (field.annotation,):
            for one in (inner, *typing.get_args(inner)):
                if isinstance(one, type) and issubclass(one, BaseModel) and one not in seen:
                    _models(one, seen)
    return seen


OPTIONAL_FIELDS = sorted(
    ((cls, name) for cls in _models(Report, set()) for name, field in cls.model_fields.items()
     if type(None) in typing.get_args(field.annotation)),
    key=lambda pair: f"{pair[0].__name__}.{pair[1]}")


def test_every_renderer_takes_a_report_with_every_field_filled_none_or_empty():
    for report in (filled(Report), filled(Report, {"all"}), filled(Report, {"all"}, empty=True)):
        report.routes = summarize(report)
        render_all(report)


@pytest.mark.parametrize("pair", OPTIONAL_FIELDS, ids=[f"{cls.__name__}.{name}" for cls, name in OPTIONAL_FIELDS])
def test_every_renderer_takes_a_report_with_one_optional_field_none(pair):
    """One field None and every other one set: a renderer that formats a field only when another is
    set (a required rtol beside a required atol) meets this report, not the all-None one."""
    for renderer, text in render_all(filled(Report, {pair})).items():
        assert "None" not in text, f"{renderer} shows {pair[1]} = None as text"


@pytest.mark.parametrize("path", sorted(DATA.glob("*.json")), ids=lambda path: path.name)
def test_every_renderer_takes_the_old_reports(path):
    render_all(load_report(path))


@pytest.mark.parametrize("path", [*EXAMPLE_FILES, *(REAL_FILES if REAL_PYTHON else [])],
                         ids=lambda path: path.stem)
def test_every_renderer_takes_every_report_the_suite_produces(shared_runs, path):
    render_all(Report.model_validate(shared_runs.get(path).report))


# Makes two renderers raise in the command's process, as a bug in them would: the terminal's table and
# the checklist.
BROKEN_RENDERERS = """
import compatcheck.report.console as console, compatcheck.report.markdown as markdown

def broken(*args):
    raise TypeError("unsupported format string passed to NoneType.__format__")

console.render = markdown.checklist = broken
"""


def test_a_renderer_that_raises_loses_none_of_the_other_outputs(tmp_path):
    faulty = tmp_path / "faulty"
    faulty.mkdir()
    (faulty / "sitecustomize.py").write_text(BROKEN_RENDERERS)
    model = tmp_path / "model.py"
    model.write_text("import torch\ndef get_model():\n    return torch.nn.Linear(4, 3)\n"
                     "def get_inputs():\n    return torch.randn(2, 4)\n")
    out = {name: tmp_path / name for name in ("report.json", "checklist.md", "junit.xml")}
    proc = run_cli("run", str(model), "--stages", "eager", "--json", str(out["report.json"]),
                   "--markdown", str(out["checklist.md"]), "--junit", str(out["junit.xml"]), "--annotations", "github",
                   "--quiet", env={"PYTHONPATH": os.pathsep.join([str(faulty), os.environ.get("PYTHONPATH", "")]),
                                   "TMPDIR": str(tmp_path)})
    assert proc.returncode == 3, proc.stdout + proc.stderr
    said = proc.stderr.strip().splitlines()
    assert [line.split(" (")[0] for line in said] == [
        "internal error: compatcheck failed to make the report on the terminal",
        "internal error: compatcheck failed to make --markdown"], proc.stderr
    log = Path(said[1].split("the traceback is in ")[1])
    assert "Traceback" in log.read_text() and "NoneType.__format__" in log.read_text()
    assert json.loads(out["report.json"].read_text())["stages"][0]["status"] == "pass"
    assert "<testcase" in out["junit.xml"].read_text() and not out["checklist.md"].exists()
