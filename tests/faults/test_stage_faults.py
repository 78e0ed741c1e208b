"""A stage that crashes or hangs gets its verdict; the stages after it still run, in a fresh worker."""

from pathlib import Path

import pytest

from tests.conftest import run_json, verdicts

HERE = Path(__file__).parent / "models"
AFTER_TRACE = "eager,jit_trace,onnx_export,onnxruntime"


@pytest.mark.parametrize("signal_name", ["SIGSEGV", "SIGABRT", "SIGKILL"])
def test_a_stage_killed_by_a_signal_is_a_crash_and_the_run_goes_on(tmp_path, monkeypatch, signal_name):
    monkeypatch.setenv("FAULT_TEST_SIGNAL", signal_name)
    proc, report = run_json(tmp_path, "run", str(HERE / "dies_when_traced.py"), "--stages", AFTER_TRACE,
                            timeout=300)
    assert proc.returncode == 1
    assert verdicts(report) == {
        "eager": "pass", "jit_trace": "crash", "onnx_export": "pass", "onnxruntime": "pass",
    }
    trace = next(s for s in report["stages"] if s["name"] == "jit_trace")
    assert trace["reason"] == f"the worker was killed by {signal_name} while building"
    assert report["workers"] == 2


def test_a_hanging_stage_times_out_and_the_run_goes_on(tmp_path):
    proc, report = run_json(tmp_path, "run", str(HERE / "hangs_when_traced.py"), "--stages", AFTER_TRACE,
                            "--timeout", "10", timeout=300)
    assert proc.returncode == 1
    assert verdicts(report)["jit_trace"] == "timeout"
    assert verdicts(report)["onnxruntime"] == "pass"
    trace = next(s for s in report["stages"] if s["name"] == "jit_trace")
    assert 10 <= trace["seconds"] < 50
    assert trace["reason"] == "no result after --timeout 10s; the worker was killed while building"


def test_a_timeout_says_which_input_set_it_came_on_and_why_a_new_shape_can_take_long(tmp_path):
    proc, report = run_json(tmp_path, "run", str(HERE / "hangs_when_compiled_again.py"), "--stages", "eager,compile",
                            "--compile-backend", "eager", "--timeout", "10", timeout=300)
    compile_ = next(s for s in report["stages"] if s["name"] == "compile")
    assert compile_["status"] == "timeout"
    assert compile_["reason"].startswith("no result after --timeout 10s; the worker was killed on input set 2 of 2, "
                                         "whose shapes are new: torch.compile may compile again for them")
    assert "torch._dynamo.mark_dynamic" in compile_["reason"]


def test_a_forward_that_raises_fails_eager_with_its_own_error_and_the_others_skip(tmp_path):
    proc, report = run_json(tmp_path, "run", str(HERE / "raises_on_input_set_2.py"), "--stages", "eager,jit_trace",
                            timeout=300)
    assert proc.returncode == 1
    assert verdicts(report) == {"eager": "fail", "jit_trace": "skip"}
    eager, trace = report["stages"]
    assert eager["reason"] == "ValueError: batches of at most 3 are supported; got 4"
    assert trace["reason"] == "eager did not pass (fail): nothing to compare with"
    assert report["workers"] == 1


def test_nothing_crashed_means_one_worker(tmp_path):
    proc, report = run_json(tmp_path, "run", str(HERE / "dies_when_traced.py"), "--stages",
                            "eager,onnx_export,onnxruntime", timeout=300)
    assert proc.returncode == 0 and report["workers"] == 1


def test_a_stage_that_changes_its_model_and_fails_leaves_the_next_stages_as_if_it_had_not_run(tmp_path):
    """Each stage gets a pristine copy of the model: the failed trace's attribute cache, the buffer it wrote
    and the submodule it replaced reach no later stage."""
    model = str(HERE / "mutates_itself_when_traced.py")
    (tmp_path / "with").mkdir()
    (tmp_path / "without").mkdir()
    _, with_trace = run_json(tmp_path / "with", "run", model, "--stages", "eager,jit_trace,onnx_export,onnxruntime")
    _, without = run_json(tmp_path / "without", "run", model, "--stages", "eager,onnx_export,onnxruntime")
    assert verdicts(with_trace)["jit_trace"] == "fail" and with_trace["workers"] == 1  # the same worker went on
    after = {s["name"]: (s["status"], s["max_abs_error"]) for s in with_trace["stages"] if s["name"] != "jit_trace"}
    assert after == {s["name"]: (s["status"], s["max_abs_error"]) for s in without["stages"]}
    assert set(verdicts(without).values()) == {"pass"}
    assert all(s["max_abs_error"] < 1e-4 for s in without["stages"])  # the copies were pristine, not merely alike


def test_recipes_that_outlast_their_budget_leave_the_stage_its_own_fail(tmp_path):
    # Each recipe costs about 4 s; --diagnose-budget 5 ends the search during the second.
    proc, report = run_json(tmp_path, "run", str(HERE / "exports_slowly_then_fails.py"), "--stages",
                            "eager,onnx_export", "--timeout", "20", "--diagnose-budget", "5", timeout=300)
    onnx = next(s for s in report["stages"] if s["name"] == "onnx_export")
    assert onnx["status"] == "fail" and "cannot be exported" in onnx["reason"]
    said = "the recipe search was cut short: --diagnose-budget 5s ran out"
    assert f"({said})" in onnx["reason"]
    cut = [line for line in onnx["recipes"] if line.endswith(said)]
    assert cut and cut[0].split(": ")[1].startswith("not finished"), onnx["recipes"]
    phase = next(p for p in onnx["phases"] if p["name"] == "recipes")
    assert phase["outcome"] == "timed-out" and phase["budget"] == 10.0
    assert onnx["seconds"] < 20
