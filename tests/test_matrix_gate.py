"""The gate's rules on synthetic cells: what is a regression, what is known, what is missing."""

import pytest
from rich.console import Console

from compatcheck.matrix import baseline as expected
from compatcheck.matrix.baseline import Baseline, Outcome, gate, judge
from compatcheck.matrix.cells import CellResult
from compatcheck.matrix.merge import finish
from compatcheck.report.model import Finding, Report, StageResult, Status

P, F, M, S, C, B = Status.PASS, Status.FAIL, Status.MISMATCH, Status.SKIP, Status.CRASH, Status.BROKEN_ENV


@pytest.mark.parametrize("was, now, outcome", [
    (P, P, Outcome.PASS), (None, P, Outcome.PASS), (S, S, Outcome.PASS), (None, S, Outcome.PASS),
    (F, F, Outcome.XFAIL), (M, C, Outcome.XFAIL), (F, S, Outcome.XFAIL), (S, F, Outcome.XFAIL),
    (F, P, Outcome.IMPROVED), (S, P, Outcome.IMPROVED),
    (P, F, Outcome.NEW_FAILURE), (P, M, Outcome.NEW_FAILURE), (P, S, Outcome.NEW_FAILURE),
    (None, F, Outcome.FAIL), (P, None, Outcome.MISSING), (None, None, Outcome.MISSING),
    (P, B, Outcome.BROKEN_ENV), (F, B, Outcome.BROKEN_ENV), (None, B, Outcome.BROKEN_ENV),
])
def test_judge(was, now, outcome):
    assert judge(was, now) is outcome


def cell(env, model, order=(0, 0), error=None, **stages) -> CellResult:
    report = None if error else Report(
        tool_version="0", created="now", environment={"torch": f"2.{13 + order[0]}.0", "python": "3.11.7"},
        stages=[StageResult(name=name, status=status, reason=f"{name} said no" if status is not P else None,
                            findings=[Finding(stage=name, kind="unsupported-op", op="aten::nonzero", message="no")]
                            if name == "onnx_export" and status is F else [])
                for name, status in stages.items()])
    return CellResult(environment=env, model=model, target=f"/m/{model}.py", order=order, key="k",
                      requirements=["torch==2.13.0"], error=error, report=report)


BASELINE = Baseline.model_validate({"environments": {
    "old": {"versions": {"torch": "2.13.0"}, "models": {
        "net": {"eager": "pass", "onnx_export": "pass"},
        "gate": {"eager": "pass", "onnx_export": "fail"},
        "gone": {"eager": "pass"}}},
    "new": {"versions": {"torch": "2.14.0"}, "models": {"net": {"eager": "pass", "onnx_export": "pass"}}},
}})

RESULTS = [
    cell("old", "net", (0, 0), eager=P, onnx_export=F),  # regression, with a finding
    cell("old", "gate", (0, 1), eager=P, onnx_export=P, jit_trace=M),  # improved, and a stage the baseline lacks
    cell("new", "net", (1, 0), error="environment new could not be built: no torch 2.14.9"),
]


def outcomes(verdicts):
    return {(v.environment, v.model, v.stage): v.outcome.value for v in verdicts}


def test_each_stage_is_judged_against_the_baseline_and_missing_cells_say_why():
    verdicts = gate(RESULTS, BASELINE, {r.id for r in RESULTS} | BASELINE.cells())
    assert outcomes(verdicts) == {
        ("old", "net", "eager"): "pass", ("old", "net", "onnx_export"): "new-failure",
        ("old", "gate", "eager"): "pass", ("old", "gate", "onnx_export"): "improved",
        ("old", "gate", "jit_trace"): "fail",
        ("new", "net", "eager"): "missing", ("new", "net", "onnx_export"): "missing",
        ("old", "gone", "eager"): "missing",
    }
    by_key = {(v.environment, v.model, v.stage): v for v in verdicts}
    regression = by_key["old", "net", "onnx_export"]
    assert regression.note == "unsupported-op `aten::nonzero`: no" and regression.finding.op == "aten::nonzero"
    assert by_key["new", "net", "eager"].note == "environment new could not be built: no torch 2.14.9"
    assert by_key["old", "gone", "eager"].note == "no cell file"


def test_a_stage_the_baseline_expects_but_the_run_left_out_is_missing():
    verdicts = gate([cell("old", "net", eager=P)], BASELINE, {"old/net"})
    assert outcomes(verdicts) == {("old", "net", "eager"): "pass", ("old", "net", "onnx_export"): "missing"}


def test_a_cell_neither_run_nor_in_the_baseline_is_one_missing_verdict():
    failed = cell("x", "y", error="compatcheck run exited with status 2: error: model file not found")
    [verdict] = gate([failed], Baseline(), {"x/y"})
    assert (verdict.stage, verdict.outcome, verdict.note) == (None, Outcome.MISSING, failed.error)


def test_only_regressions_fail_the_run_and_missing_ones_only_when_strict(tmp_path):
    quiet = Console(file=open("/dev/null", "w"))
    path = tmp_path / "baseline.yaml"
    expected.save(BASELINE, path)
    assert finish(RESULTS, path, tmp_path / "a", quiet) == 1
    without_regression = [RESULTS[1], RESULTS[2]]
    assert finish(without_regression, path, tmp_path / "b", quiet, cells={"old/gate", "new/net"}) == 0
    assert finish(without_regression, path, tmp_path / "c", quiet, cells={"old/gate", "new/net"}, strict=True) == 1
    assert {p.name for p in (tmp_path / "a").iterdir()} == {"matrix.md", "matrix.json", "junit.xml"}


def test_updating_the_baseline_keeps_unrun_cells_and_drops_cells_left_out_of_the_matrix(tmp_path):
    path = tmp_path / "baseline.yaml"
    expected.save(BASELINE, path)
    quiet = Console(file=open("/dev/null", "w"))
    keep = {"old/net", "old/gate", "new/net"}
    assert finish(RESULTS, path, tmp_path / "out", quiet, cells=keep, update=True, keep=keep) == 0
    new = expected.load(path)
    assert new.expected("old", "net") == {"eager": P, "onnx_export": F}
    assert new.expected("old", "gate") == {"eager": P, "onnx_export": P, "jit_trace": M}
    assert new.expected("new", "net") == BASELINE.expected("new", "net")  # its environment did not build
    assert "gone" not in new.environments["old"].models
    assert new.environments["old"].versions == {"torch": "2.13.0", "python": "3.11.7"}
    assert path.read_text().startswith("# Expected verdicts")
    assert finish(RESULTS[:2], path, tmp_path / "out", quiet, cells={"old/net", "old/gate"}) == 0


def test_a_baseline_with_an_unknown_verdict_is_refused(tmp_path):
    path = tmp_path / "baseline.yaml"
    path.write_text("environments:\n  old:\n    models:\n      net: {eager: passed}\n")
    with pytest.raises(Exception, match=r"environments.old.models.net.eager: Input should be 'pass'"):
        expected.load(path)
    assert expected.load(tmp_path / "not-yet.yaml") == Baseline()


def test_a_broken_environment_fails_the_run_as_such_and_never_enters_the_baseline(tmp_path):
    quiet = Console(file=open("/dev/null", "w"))
    path = tmp_path / "baseline.yaml"
    expected.save(BASELINE, path)
    broken = cell("old", "net", eager=P, onnx_export=B)
    broken.report.stages[1].reason = "broken environment: torch needs the module 'setuptools'; fix: pip install setuptools"
    [_, verdict] = gate([broken], BASELINE, {"old/net"})
    assert verdict.outcome is Outcome.BROKEN_ENV and "pip install setuptools" in verdict.note
    assert finish([broken], path, tmp_path / "out", quiet, cells={"old/net"}) == 1
    text = (tmp_path / "out" / "matrix.md").read_text()
    assert "## Broken environments" in text and "## Regressions" not in text
    assert 'type="broken-env"' in (tmp_path / "out" / "junit.xml").read_text()
    finish([broken], path, tmp_path / "out", quiet, cells={"old/net"}, update=True, keep={"old/net"})
    assert expected.load(path).expected("old", "net") == {"eager": P, "onnx_export": P}  # what was expected stands


def test_an_unreachable_optional_environment_is_reported_and_never_fails_the_run(tmp_path):
    quiet = Console(file=open("/dev/null", "w"))
    away = CellResult(environment="nightly", model="net", target="/m/net.py", order=(2, 0), key="k",
                      unavailable=True, error="optional environment nightly: https://n/simple cannot be reached")
    [verdict] = gate([away], Baseline(), {"nightly/net"})
    assert (verdict.outcome, verdict.note) == (Outcome.UNAVAILABLE, away.error)
    assert finish([away], None, tmp_path / "out", quiet, cells={"nightly/net"}, strict=True) == 0
    assert "unavailable[^1]" in (tmp_path / "out" / "matrix.md").read_text()
