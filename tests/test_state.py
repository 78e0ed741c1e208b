"""State kept across calls (tests/models/state): eager names each piece of state and the line that writes
it; every stage is compared with eager's first call on a pristine copy; a stage whose artifact froze the
state says so; no recipe silences the check that caught it; none of it is called randomness."""

from __future__ import annotations

from concurrent.futures import ThreadPoolExecutor

import pytest

from tests.conftest import ROOT, run_json

STATE = ROOT / "tests" / "models" / "state"
RUNS = {"counter": "eager,export,jit_trace", "helper_global": "eager,onnxruntime",
        "running_mean_buffer": "eager,onnxruntime"}


@pytest.fixture(scope="module")
def reports(tmp_path_factory) -> dict[str, dict]:
    def run(name: str) -> tuple[str, dict]:
        return name, run_json(tmp_path_factory.mktemp(name), "run", str(STATE / f"{name}.py"), "--stages",
                              RUNS[name], "--no-cache")[1]

    with ThreadPoolExecutor(2) as pool:
        return dict(pool.map(run, RUNS))


def _stage(report: dict, name: str) -> dict:
    return next(stage for stage in report["stages"] if stage["name"] == name)


def _state(stage: dict) -> list[dict]:
    return [f for f in stage["findings"] if f["kind"] == "state-across-calls"]


@pytest.mark.parametrize("model, place, line", [
    ("counter", "blocks.1.count", "self.count += 1"),
    ("helper_global", "anneal_schedule.state", 'state["calls"] += 1'),
    ("running_mean_buffer", "mean", "self.mean.mul_(0.5).add_(0.5 * x.mean(0))"),
])
def test_eager_names_the_state_and_the_line_that_writes_it(reports, model, place, line):
    eager = _stage(reports[model], "eager")
    assert eager["status"] == "pass", eager["reason"]
    found = _state(eager)
    assert found and found[0]["op"] == place and found[0]["code"] == line, eager["findings"]
    assert not any(f["kind"] == "nondeterministic" for f in eager["findings"]), "state is not randomness"


@pytest.mark.parametrize("model, stage", [("counter", "export"), ("helper_global", "onnxruntime"),
                                          ("running_mean_buffer", "onnxruntime")])
def test_an_artifact_that_froze_the_state_answers_like_the_first_call_and_says_so(reports, model, stage):
    """Compared with eager's first call on a pristine copy on every input set, it passes; the finding says
    it answers like that first call forever."""
    result = _stage(reports[model], stage)
    assert result["status"] == "pass", result["reason"]
    found = _state(result)
    assert found and "first call, forever" in found[0]["message"], result["findings"]


def test_the_trace_check_that_caught_it_is_not_silenced(reports):
    trace = _stage(reports["counter"], "jit_trace")
    assert trace["status"] == "fail" and _state(trace), trace["findings"]
    assert not any("check_trace=False" in recipe for recipe in trace["recipes"]), trace["recipes"]
    assert not any(f["kind"] == "passes-with" for f in trace["findings"])
