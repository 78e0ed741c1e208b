"""The report as its reader reads it: for every example model, from the suite's one run of it, the
console (in a pipe's 80 columns and a wide terminal), the checklist and the routes say what the JSON
report says: every verdict, every error figure, every route; no reason is cut mid-word, a pass's note
is in the notes block, and the checklist's numerics cannot call a tolerance held on a stage whose
verdict is not pass without saying what the verdict is."""

from __future__ import annotations

import io
import re

import pytest
from rich.console import Console

from compatcheck.report.console import WIDE, render
from compatcheck.report.markdown import SYMBOL, checklist, plain
from compatcheck.report.model import Report, Status, shown_error
from tests.shared_runs import EXAMPLE_FILES


def _console(report: Report, width: int, terminal: bool) -> str:
    out = io.StringIO()
    render(report, Console(file=out, width=width, force_terminal=terminal, color_system=None))
    return out.getvalue()


@pytest.fixture(params=EXAMPLE_FILES, ids=[path.stem for path in EXAMPLE_FILES])
def report(request, shared_runs) -> Report:
    return Report.model_validate(shared_runs.get(request.param).report)


@pytest.mark.slow
def test_the_console_in_a_pipe_gives_every_verdict_figure_and_whole_reason_of_the_json(report):
    text = _console(report, 80, terminal=False)
    for stage in report.stages:
        figure = shown_error(stage, stage.max_abs_error)
        row = next(line for line in text.splitlines() if re.match(rf"│ {stage.name} +│", line))
        assert stage.status.value in row and (f"{figure:.2e}" in row if figure is not None else "e+" not in row and
                                              "e-" not in row), row
        if stage.reason and stage.status is not Status.PASS:
            assert re.search(rf"^{stage.name} {stage.status.value}: ", text, re.M)  # below the table, a line each
        if stage.reason:
            assert not re.search(r"\w…", stage.reason), stage.reason  # shortened at a word, never inside one
        if stage.reason and stage.status is Status.PASS:
            assert text.split("notes:\n", 1)[1].count(f"    {stage.name}: ") == 1
    assert all(len(line) <= 80 for line in text.splitlines() if line[:1] in "┏┃┡│└")  # the table fits
    for route in report.routes:
        assert re.search(rf"route {re.escape(route.name)} +{re.escape(route.summary[:60])}", text), route.summary
        assert " for at " not in route.summary and not re.search(r"\bby \S+ (?:for|if|while) at", route.summary)


@pytest.mark.slow
def test_a_wide_terminal_keeps_the_reasons_in_the_table(report):
    text = _console(report, WIDE + 40, terminal=True)
    failing = [stage for stage in report.stages if stage.reason and stage.status is not Status.PASS]
    assert not [stage.name for stage in failing if re.search(rf"^{stage.name} {stage.status.value}: ", text, re.M)]
    assert [stage.name for stage in failing if not re.search(rf"│ {stage.name} +│.*│ \S", text)] == [], text


@pytest.mark.slow
def test_the_checklist_agrees_with_the_verdicts(report):
    text = checklist(report)
    for stage in report.stages:
        figure = shown_error(stage, stage.max_abs_error)
        row = next(line for line in text.splitlines() if line.startswith(f"| `{stage.name}` | {SYMBOL[stage.status]}"))
        assert row.split(" | ")[2] == (f"{figure:.2e}" if figure is not None else ""), row
        for line in (one for one in text.split("## Numerics", 1)[1].splitlines() if one.startswith(f"| `{stage.name}` |")):
            if "✅ held" in line and stage.status is not Status.PASS:
                assert f"the verdict is {stage.status.value}" in line, line
            assert "atol 0.0e+00 or" not in line
    for route in report.routes:
        assert plain(route.summary) in text
    assert SYMBOL[Status.MISMATCH] not in {SYMBOL[status] for status in Status if status is not Status.MISMATCH}


def test_a_stage_whose_outputs_held_but_whose_verdict_is_mismatch_says_so_in_the_numerics():
    """triton answered every input set within tolerance, alone; under load, batched with other requests,
    it did not: the numerics row must not say only that the tolerance held."""
    leaf = {"output": "output", "ok": True, "max_abs_error": 2.38e-07, "max_rel_error": 1e-07, "atol": 1e-05,
            "rtol": 1e-04, "required_atol": 0.0, "required_rtol": 0.0}
    report = Report.model_validate({"tool_version": "0", "created": "now", "stages": [
        {"name": "triton", "status": "mismatch", "reason": "under load, batched: max abs error 0.499",
         "input_sets": [{"index": 0, "ok": True, "leaves": [leaf]}]}]})
    row = next(line for line in checklist(report).split("## Numerics", 1)[1].splitlines() if line.startswith("| `triton`"))
    assert "✅ held on the input sets; the verdict is mismatch: under load, batched: max abs error 0.499" in row
    assert "atol 0.0e+00 (at rtol 0.0001) or rtol 0.0e+00 (at atol 1e-05)" in row
