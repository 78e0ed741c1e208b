"""Faults from the model's process and from the user: the run goes on, the report says what happened,
nothing is left running."""

import json
import os
import signal
import subprocess
import sys
from pathlib import Path

import pytest

from tests.conftest import ROOT, run_json, verdicts
from tests.faults.conftest import poll_until_empty, wait_until_hanging

HERE = Path(__file__).parent / "models"
TRACE_AND_AFTER = "eager,jit_trace,onnx_export,onnxruntime"


def processes_mentioning(text: str) -> list[int]:
    """PIDs whose command line contains `text` (a path unique to one test)."""
    found = []
    for entry in Path("/proc").iterdir():
        if entry.name.isdigit():
            try:
                if text in (entry / "cmdline").read_bytes().decode(errors="replace"):
                    found.append(int(entry.name))
            except OSError:
                continue
    return found


def test_os_exit_inside_a_stage_is_a_crash(tmp_path):
    proc, report = run_json(tmp_path, "run", str(HERE / "exits_when_traced.py"), "--stages", TRACE_AND_AFTER)
    assert verdicts(report)["jit_trace"] == "crash"
    assert report["stages"][1]["reason"] == "the worker exited with status 3 while building"
    assert verdicts(report)["onnxruntime"] == "pass"


def test_memory_limit_turns_a_runaway_allocation_into_a_failed_stage(tmp_path):
    proc, report = run_json(tmp_path, "run", str(HERE / "hogs_memory_when_traced.py"), "--stages",
                            TRACE_AND_AFTER, "--memory-limit", "3G")
    assert verdicts(report) == {"eager": "pass", "jit_trace": "fail", "onnx_export": "pass", "onnxruntime": "pass"}
    assert "can't allocate memory" in report["stages"][1]["reason"]


def test_megabytes_of_model_output_neither_block_nor_corrupt_the_run(tmp_path):
    proc, report = run_json(tmp_path, "run", str(HERE / "floods_stdout.py"), "--stages", "eager,jit_trace",
                            timeout=300)
    assert proc.returncode == 0 and verdicts(report) == {"eager": "pass", "jit_trace": "pass"}
    assert len(proc.stdout) < 100_000


def test_global_state_changed_by_one_stage_does_not_leak_into_the_next(tmp_path):
    proc, report = run_json(tmp_path, "run", str(HERE / "changes_globals.py"), "--stages",
                            "eager,jit_trace,onnx_export")
    # The trace itself recorded a float64 constant: its own verdict shows the change...
    assert verdicts(report) == {"eager": "pass", "jit_trace": "mismatch", "onnx_export": "pass"}
    assert "dtype float64, expected float32" in report["stages"][1]["reason"]
    # ...but the export, in the same worker, ran with the default dtype restored.
    assert report["workers"] == 1


@pytest.mark.parametrize("signum", [signal.SIGINT, signal.SIGTERM])
def test_interrupt_mid_stage_writes_the_partial_report_leaves_nothing_and_resumes(tmp_path, signum):
    artifacts, out = tmp_path / "artifacts", tmp_path / "report.json"
    args = [sys.executable, "-m", "compatcheck", "run", str(HERE / "hangs_if_asked.py"), "--stages",
            TRACE_AND_AFTER, "--json", str(out), "--artifacts", str(artifacts)]
    hanging = tmp_path / "hanging"
    proc = subprocess.Popen(args, cwd=ROOT, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL,
                            env={**os.environ, "FAULT_TEST_HANG": str(hanging)})
    try:
        wait_until_hanging(hanging, proc)
        proc.send_signal(signum)
        proc.wait(timeout=60)
    finally:
        if proc.poll() is None:
            proc.kill()
    assert proc.returncode == 130
    report = json.loads(out.read_text())
    assert report["interrupted"] is True
    assert verdicts(report) == {"eager": "pass", "jit_trace": "skip", "onnx_export": "skip", "onnxruntime": "skip"}
    assert report["stages"][1]["reason"] == "interrupted before it ran"
    assert poll_until_empty(lambda: processes_mentioning(str(artifacts))) == []

    resumed = subprocess.run(args + ["--resume"], cwd=ROOT, capture_output=True, text=True, timeout=300)
    assert resumed.returncode == 0, resumed.stdout + resumed.stderr
    report2 = json.loads(out.read_text())
    assert verdicts(report2) == dict.fromkeys(["eager", "jit_trace", "onnx_export", "onnxruntime"], "pass")
    assert report2["stages"][0] == report["stages"][0], "eager's verdict should have been kept, not rerun"
    assert report2["interrupted"] is False


def test_jobs_runs_independent_lanes_in_separate_workers(tmp_path):
    proc, report = run_json(tmp_path, "run", "models/convnet.py", "--stages", "compile,jit_trace,onnxruntime",
                            "--compile-backend", "eager", "--jobs", "2")
    assert proc.returncode == 0
    assert verdicts(report) == dict.fromkeys(["eager", "compile", "jit_trace", "onnx_export", "onnxruntime"], "pass")
    assert report["workers"] == 2


def test_without_jobs_a_run_uses_one_worker_per_four_cores(tmp_path):
    from compatcheck import host
    from compatcheck.session import workers

    proc, report = run_json(tmp_path, "run", "models/convnet.py", "--stages", "jit_trace,onnxruntime")
    assert proc.returncode == 0
    assert verdicts(report) == dict.fromkeys(["eager", "jit_trace", "onnx_export", "onnxruntime"], "pass")
    assert report["workers"] == min(2, max(1, host.cores() // 4))
