"""More bad input: one clear line on stderr, exit code 2, no traceback."""

import json

import pytest

from compatcheck.report.model import SCHEMA_VERSION
from tests.conftest import run_cli, run_json


def assert_one_line_usage_error(proc, starts_with):
    assert proc.returncode == 2, proc.stdout + proc.stderr
    assert "Traceback" not in proc.stderr and len(proc.stderr.strip().splitlines()) == 1, proc.stderr
    assert proc.stderr.strip().startswith(starts_with), proc.stderr


@pytest.mark.parametrize("args, starts_with", [
    (["--jobs", "0"], "error: --jobs must be at least 1"),
    (["--memory-limit", "lots"], "error: --memory-limit: must be a positive size"),
    (["--resume"], "error: --resume needs --json"),
    (["--timeout", "soon"], "error: Invalid value for '--timeout'"),
    (["--no-such-option"], "error: No such option: --no-such-option"),
])
def test_bad_run_options(args, starts_with):
    assert_one_line_usage_error(run_cli("run", "models/convnet.py", *args, timeout=60), starts_with)


def test_unwritable_artifacts_folder(tmp_path):
    blocker = tmp_path / "file"
    blocker.write_text("")
    proc = run_cli("run", "models/convnet.py", "--artifacts", str(blocker / "sub"), timeout=60)
    assert_one_line_usage_error(proc, "error: cannot create --artifacts")


def test_inputs_on_a_device_that_is_not_there(write_model):
    path = write_model("import torch\ndef get_model():\n    return torch.nn.Identity()\n"
                       "def get_inputs():\n    return torch.ones(2, device='cuda')\n")
    proc = run_cli("run", str(path), "--stages", "eager", timeout=120)
    assert_one_line_usage_error(proc, "error: get_inputs() raised")
    assert "model.py:5" in proc.stderr


def test_checklist_refuses_a_report_of_another_schema_version(tmp_path):
    old = tmp_path / "old.json"
    old.write_text(json.dumps({"schema_version": 99, "stages": []}))
    assert_one_line_usage_error(run_cli("checklist", str(old), timeout=60),
                                f"error: {old} has schema_version 99; this compatcheck reads schema_version 1 to {SCHEMA_VERSION}")
    broken = tmp_path / "broken.json"
    broken.write_text('{"schema_version": 1, "stag')
    assert_one_line_usage_error(run_cli("checklist", str(broken), timeout=60), f"error: cannot read report {broken}")


def test_secrets_in_the_environment_never_reach_the_report(tmp_path, monkeypatch):
    monkeypatch.setenv("TORCH_HUB_API_KEY", "hunter2-secret-value")
    monkeypatch.setenv("TRITON_AUTH_TOKEN", "another-secret-value")
    monkeypatch.setenv("OMP_NUM_THREADS", "2")
    proc, report = run_json(tmp_path, "run", "models/convnet.py", "--stages", "eager", timeout=120)
    text = (tmp_path / "report.json").read_text()
    assert "secret-value" not in text and "TORCH_HUB_API_KEY" not in text
    assert report["environment"]["env:OMP_NUM_THREADS"] == "2"


def test_a_report_of_the_previous_schema_version_is_still_read(tmp_path):
    old = tmp_path / "v1.json"
    old.write_text(json.dumps({"schema_version": 1, "tool_version": "0.1.0", "created": "2026-11-01T00:00:00+00:00",
                               "stages": [{"name": "eager", "status": "pass", "cached": True}]}))
    proc = run_cli("checklist", str(old), timeout=60)
    assert proc.returncode == 0 and "✅ eager" in proc.stdout, proc.stdout + proc.stderr


DEEP_MODEL = """\
import torch


def nested(value, levels):
    for _ in range(levels):
        value = [value]
    return value


class Deep(torch.nn.Module):
    def forward(self, x):
        while isinstance(x, list):
            x = x[0]
        return nested(x * 2, OUTPUT_LEVELS)


def get_model():
    return Deep()


def get_inputs():
    return [(nested(torch.ones(2), INPUT_LEVELS),)]
"""


@pytest.mark.parametrize("inputs, outputs, says", [
    (0, 1200, "error: forward()'s output for input set 1 nests 1200 levels deep (containers inside containers); "
              "compatcheck walks at most 100 levels"),
    (1200, 0, "error: get_inputs(): input set 1 nests 1201 levels deep"),
], ids=["outputs", "inputs"])
def test_outputs_or_inputs_nested_past_the_recursion_limit_are_one_line(write_model, inputs, outputs, says):
    path = write_model(f"INPUT_LEVELS, OUTPUT_LEVELS = {inputs}, {outputs}\n" + DEEP_MODEL)
    proc = run_cli("run", str(path), "--stages", "eager", timeout=120)
    assert_one_line_usage_error(proc, says)
