"""Hostile model files and options: the verdict stays right, nothing secret is written, nothing is
left running, and bad input is one clear line with exit code 2. Each test checks, when it ends,
that no process and no temporary folder of its runs remains."""

import json
import os
import signal
import subprocess
import sys
import time
from pathlib import Path

import pytest

from tests.conftest import ROOT, cache_dir, run_cli, run_json, verdicts
from tests.faults.conftest import processes_with, wait_until_hanging
from tests.faults.test_bad_input import assert_one_line_usage_error

HERE = Path(__file__).parent / "models"
pytestmark = pytest.mark.usefixtures("leaves_nothing")

IDENTITY = "import torch\nclass M(torch.nn.Module):\n    def forward(self, x):\n        return {}\n" \
           "def get_model():\n    return M()\ndef get_inputs():\n    return torch.ones(2, 3)\n"


def test_a_forward_that_changes_its_input_gets_fresh_inputs_every_run_and_a_finding(tmp_path):
    proc, report = run_json(tmp_path, "run", str(HERE / "mutates_input.py"), "--stages",
                            "eager,compile,jit_trace,onnx_export,onnxruntime", "--compile-backend", "eager")
    assert verdicts(report) == dict.fromkeys(["eager", "compile", "jit_trace", "onnx_export", "onnxruntime"], "pass")
    assert all(stage["max_abs_error"] == 0 for stage in report["stages"]), "every stage saw the same inputs"
    kinds = [(f["stage"], f["kind"]) for f in report["findings"]]
    assert kinds == [("eager", "input-mutation")], "not nondeterministic: each eager run had its own copy"
    finding = report["findings"][0]
    assert (finding["file"], finding["line"], finding["code"], finding["op"]) == \
        ("mutates_input.py", 8, "x.mul_(2)", "mul_")
    assert finding["rewrite"].startswith("x = x.clone()")


@pytest.mark.parametrize("tolerance", ['{"atol": float("nan")}', '{"rtol": float("inf")}',
                                       '{"output": {"atol": float("nan")}}', '{"atol": -1.0}'])
def test_a_tolerance_in_the_model_file_must_be_finite_and_non_negative(write_model, tolerance):
    path = write_model(f"TOLERANCE = {tolerance}\n" + IDENTITY.format("x + 3.0 * torch.jit.is_tracing()"))
    proc = run_cli("run", str(path), "--stages", "eager,jit_trace", "--no-cache", timeout=120)
    assert_one_line_usage_error(proc, "error: TOLERANCE")
    assert "must be a finite non-negative number" in proc.stderr


@pytest.mark.parametrize("args", [["--atol", "inf"], ["--rtol", "nan"], ["--atol", "-1"]])
def test_a_tolerance_on_the_command_line_must_be_finite_and_non_negative(args):
    assert_one_line_usage_error(run_cli("run", "models/convnet.py", *args, timeout=60),
                                f"error: {args[0]}: must be a finite non-negative number, got {args[1]}")


def test_a_helper_forked_at_import_does_not_turn_a_crash_into_a_timeout(tmp_path):
    started = time.monotonic()
    proc, report = run_json(tmp_path, "run", str(HERE / "forks_helper_then_crashes.py"), "--stages",
                            "eager,jit_trace,onnx_export", "--timeout", "60")
    assert verdicts(report) == {"eager": "pass", "jit_trace": "crash", "onnx_export": "pass"}
    assert report["stages"][1]["reason"] == "the worker exited with status 3 while building"
    assert report["stages"][1]["seconds"] < 10 and time.monotonic() - started < 60


@pytest.mark.parametrize("returned", ["None", "'text'", "(None, 'a')", "{'a': None}"])
def test_an_output_without_any_tensor_or_number_is_a_model_file_error(write_model, returned):
    proc = run_cli("run", str(write_model(IDENTITY.format(returned))), "--stages", "eager,onnx_export",
                   "--no-cache", timeout=120)
    assert_one_line_usage_error(proc, "error: forward() returned")
    assert "with no tensor or number in it: there is nothing to compare or deploy" in proc.stderr


def test_a_none_beside_a_tensor_passes_every_stage_and_gets_no_advice(tmp_path, write_model):
    path = write_model(IDENTITY.format("(x * 2, None)"))
    proc, report = run_json(tmp_path, "run", str(path), "--stages", "eager,jit_script,onnx_export,onnxruntime")
    assert verdicts(report) == dict.fromkeys(["eager", "jit_script", "onnx_export", "onnxruntime"], "pass")
    assert report["findings"] == []
    ort = report["stages"][3]["input_sets"][0]
    assert ort["structure"] == "eager's output 1 (NoneType) left out: a graph returns only tensors and numbers"


SECRETS = {
    "MY_API_SECRET": "s3cr3t-value-8c1f",
    "TRITON_SERVER_URL": "http://admin:hunter2pw@triton.internal:8000",
    "TORCH_HOME_MIRROR": "https://ghp_A1b2C3d4E5f6G7h8I9j0K1l2M3n4O5p6Q7r8@mirror.example",
    "ONNX_HUB_NOTE": "use hf_AbCdEfGhIjKlMnOpQrStUvWxYz012345 or sk-proj-AbCdEfGhIjKlMnOpQrStUvWx0123",
    "ORT_AWS_HINT": "AKIAABCDEFGHIJKLMNOP",
}
LEAKS = ["s3cr3t-value-8c1f", "hunter2pw", "ghp_A1b2C3", "hf_AbCdEf", "sk-proj-AbCd", "AKIAABCDEFGHIJKLMNOP"]


def test_secrets_are_redacted_in_every_file_a_run_writes(tmp_path, monkeypatch):
    for name, value in SECRETS.items():
        monkeypatch.setenv(name, value)
    out = tmp_path / "out"
    out.mkdir()
    proc = run_cli("run", str(HERE / "leaks_secret.py"), "--stages", "eager,jit_trace", "--json",
                   str(out / "report.json"), "--markdown", str(out / "checklist.md"), timeout=300)
    assert proc.returncode == 1, proc.stdout + proc.stderr
    report = json.loads((out / "report.json").read_text())
    assert "cannot reach the registry with [redacted]" in report["stages"][1]["reason"]
    assert report["environment"]["env:TRITON_SERVER_URL"] == "http://admin:[redacted]@triton.internal:8000"
    assert report["environment"]["env:ORT_AWS_HINT"] == "[redacted]"
    written = [p for folder in (tmp_path, cache_dir()) for p in folder.rglob("*") if p.is_file()]
    assert any(cache_dir() in p.parents for p in written), "the failed stage was cached"
    for path in written:
        text = path.read_text(errors="replace")
        assert not [leak for leak in LEAKS if leak in text], path
    assert not [leak for leak in LEAKS if leak in proc.stdout + proc.stderr]


def test_children_in_a_new_session_end_with_the_stage(tmp_path, leaves_nothing):
    proc, report = run_json(tmp_path, "run", str(HERE / "spawns_new_session_child.py"), "--stages",
                            "eager,jit_trace")
    assert verdicts(report) == {"eager": "pass", "jit_trace": "pass"}
    # the fixture asserts that the child the model started is gone


def test_kill_9_of_compatcheck_leaves_no_process_and_no_folder(tmp_path, leaves_nothing):
    args = [sys.executable, "-m", "compatcheck", "run", str(HERE / "spawns_new_session_child.py"), "--stages",
            "eager,jit_trace", "--no-cache"]
    hanging = tmp_path / "hanging"
    proc = subprocess.Popen(args, cwd=ROOT, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL,
                            env={**os.environ, "FAULT_TEST_HANG": str(hanging)})
    try:
        wait_until_hanging(hanging, proc)  # the model's child lives in its own session
        assert len(processes_with(leaves_nothing)) >= 3, "compatcheck, its worker and the model's child"
        proc.send_signal(signal.SIGKILL)
        proc.wait(timeout=10)
    finally:
        if proc.poll() is None:
            proc.kill()
    # the fixture asserts that no process and no temporary folder remain


@pytest.mark.parametrize("args, says", [
    (["--timeout", "inf"], "error: --timeout: must be a number of seconds above 0 and at most 604800"),
    (["--timeout", "3000000"], "error: --timeout: must be a number of seconds above 0 and at most 604800"),
    (["--memory-limit", "inf"], "error: --memory-limit: must be a positive size like 4G or 512M, got 'inf'"),
    (["--memory-limit", "nan"], "error: --memory-limit: must be a positive size like 4G or 512M, got 'nan'"),
    (["--memory-limit", "1e30G"], "error: --memory-limit: 1e30G is more than any machine can address"),
    (["--memory-limit", "1M"], "error: --memory-limit: 1M is too small to load torch and the model"),
    (["--stages", ","], "error: --stages names no stage"),
])
def test_impossible_options_are_one_clear_line(args, says):
    assert_one_line_usage_error(run_cli("run", "models/convnet.py", *args, timeout=60), says)


@pytest.mark.parametrize("source, says", [
    ("import sys\nsys.exit(0)\n", "error: importing model.py called sys.exit(0) at model.py:2"),
    ("raise KeyboardInterrupt\n", "error: importing model.py raised KeyboardInterrupt at model.py:1"),
    ("import torch\ndef get_model():\n    return torch.nn.Identity()\ndef get_inputs():\n"
     "    return [(torch.ones(2),), {'x': torch.ones(2)}]\n",
     "error: get_inputs(): input set 2 has 1 input (x), input set 1 has 1 input (args[0])"),
    ("import torch\ndef get_model():\n    return torch.nn.Identity()\ndef get_inputs():\n"
     "    return [([torch.ones(2)],), ((torch.ones(2),),)]\n",
     "error: get_inputs(): input set 2 holds the same inputs in other containers: a tuple at args[0] "
     "where input set 1 has a list"),
])
def test_model_files_that_exit_interrupt_or_disagree_are_one_clear_line(write_model, source, says):
    proc = run_cli("run", str(write_model(source)), "--stages", "eager", "--no-cache", timeout=120)
    assert_one_line_usage_error(proc, says)


def test_a_binary_file_is_a_syntax_error_naming_it(tmp_path):
    path = tmp_path / "model.py"
    path.write_bytes(bytes(range(256)) * 4)
    proc = run_cli("run", str(path), "--no-cache", timeout=120)
    assert_one_line_usage_error(proc, "error: syntax error in model.py")


def test_sys_exit_inside_a_stage_fails_that_stage_and_the_run_goes_on(tmp_path, write_model):
    path = write_model(IDENTITY.format("x * 2") .replace(
        "        return x * 2", "        if torch.jit.is_tracing():\n            import sys\n            sys.exit(0)\n"
                                "        return x * 2"))
    proc, report = run_json(tmp_path, "run", str(path), "--stages", "eager,jit_trace,onnx_export")
    assert verdicts(report) == {"eager": "pass", "jit_trace": "fail", "onnx_export": "pass"}
    assert report["stages"][1]["reason"] == "SystemExit: 0"
    assert report["workers"] == 1


def test_triton_repo_checks_its_timeout_like_run(tmp_path):
    proc = run_cli("triton-repo", "models/convnet.py", "-o", str(tmp_path / "repo"), "--timeout", "inf", timeout=60)
    assert_one_line_usage_error(proc, "error: --timeout: must be a number of seconds above 0")
