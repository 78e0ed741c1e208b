"""The real `compatcheck matrix` on a one-environment matrix: a deliberate regression, reuse, --resume, interrupts.

The environment is the repository matrix's torch-2.13 one (same requirements, so the same key, in the
default cache): whichever of this test and the repository matrix runs first builds it.
"""

import json
import re
import signal
import subprocess
import sys
import time

import pytest
import yaml

from tests.conftest import MODELS, ROOT, run_cli

pytestmark = pytest.mark.slow


def write_matrix(tmp_path, paths, stages, baseline=None):
    (tmp_path / "matrix.yaml").write_text(yaml.safe_dump({
        "environments": {"torch-2.13": {"requirements": ["torch==2.13.0"]}},
        "models": {"stages": stages, "paths": [str(p) for p in paths]},
        "baseline": "baseline.yaml",
    }))
    if baseline:
        (tmp_path / "baseline.yaml").write_text(yaml.safe_dump({"environments": {"torch-2.13": {"models": baseline}}}))
    return str(tmp_path / "matrix.yaml")


def matrix(*args):
    return run_cli("matrix", *args, "--jobs", "2", timeout=1800)


def test_a_stage_that_fails_where_the_baseline_says_pass_is_a_new_failure(tmp_path):
    # Deliberately wrong baseline: item_call's trace freezes a .item() and mismatches on input set 2.
    path = write_matrix(tmp_path, [MODELS / "item_call.py"], ["eager", "jit_trace"],
                        {"item_call": {"eager": "pass", "jit_trace": "pass"}})
    out = str(tmp_path / "out")
    first = matrix(path, "--out", out)
    assert first.returncode == 1, first.stdout + first.stderr
    assert "new-failure: torch-2.13/item_call jit_trace" in first.stdout
    grid = (tmp_path / "out/matrix.md").read_text()
    assert "- **item_call** · `jit_trace` on **torch-2.13**: pass in the baseline, now mismatch" in grid
    assert "| item_call | ✅ ❗[^1]🔻 |" in grid
    junit = (tmp_path / "out/junit.xml").read_text()
    assert 'name="jit_trace"' in junit and 'type="new-failure"' in junit
    cell = json.loads((tmp_path / "out/cells/torch-2.13__item_call.json").read_text())
    assert cell["report"]["environment"]["torch"].startswith("2.13.0") and cell["error"] is None

    second = matrix(path, "--out", out)
    assert "environment torch-2.13: reusing" in second.stdout and second.returncode == 1
    assert "torch-2.13/item_call: 1 pass, 1 mismatch" in second.stdout

    resumed = matrix(path, "--out", out, "--resume", "--update-baseline")
    assert "kept from the last run" in resumed.stdout and resumed.returncode == 0
    assert yaml.safe_load((tmp_path / "baseline.yaml").read_text())["environments"]["torch-2.13"]["models"] == {
        "item_call": {"eager": "pass", "jit_trace": "mismatch"}}
    assert matrix(path, "--out", out, "--resume").returncode == 0


SLEEPY = """\
# {marker}: unique, so no cached result can stand in for a run
import time
from pathlib import Path

import torch
from torch import nn


def get_model():
    flag = Path(__file__).with_suffix(".loaded")
    if not flag.exists():  # slow the first time only: long enough to be interrupted
        flag.touch()
        time.sleep(120)
    return nn.Linear(2, 2).eval()


def get_inputs():
    return (torch.randn(1, 2),)
"""


def test_an_interrupted_matrix_keeps_finished_cells_and_resume_runs_the_rest(tmp_path):
    (tmp_path / "sleepy.py").write_text(SLEEPY.format(marker=tmp_path))
    path = write_matrix(tmp_path, [MODELS / "item_call.py", tmp_path / "sleepy.py"], ["eager"])
    out = tmp_path / "out"
    process = subprocess.Popen([sys.executable, "-m", "compatcheck", "matrix", path, "--out", str(out), "--jobs", "1"],
                               cwd=ROOT, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
    deadline = time.monotonic() + 900
    while not (tmp_path / "sleepy.loaded").exists() and process.poll() is None and time.monotonic() < deadline:
        time.sleep(0.2)
    process.send_signal(signal.SIGINT)  # item_call's cell is done, sleepy's is loading its model
    stdout, stderr = process.communicate(timeout=120)
    assert process.returncode == 130, stdout + stderr
    assert "run again with --resume" in stderr
    assert [p.name for p in (out / "cells").iterdir()] == ["torch-2.13__item_call.json"]
    resumed = matrix(path, "--out", str(out), "--resume")
    assert resumed.returncode == 0, resumed.stdout + resumed.stderr
    assert "torch-2.13/item_call: 1 pass (kept from the last run)" in resumed.stdout
    assert "torch-2.13/sleepy: 1 pass (" in resumed.stdout and "2 of 2 cells" in resumed.stdout


def test_build_only_builds_or_reuses_each_environment_and_runs_no_cell(tmp_path):
    import socket

    with socket.socket() as probe:  # a port nothing listens on: the optional environment's index
        probe.bind(("127.0.0.1", 0))
        port = probe.getsockname()[1]
    (tmp_path / "matrix.yaml").write_text(yaml.safe_dump({
        "environments": {
            "torch-2.13": {"requirements": ["torch==2.13.0"]},
            "offline": {"requirements": ["torch"], "index_url": f"http://127.0.0.1:{port}/simple", "optional": True},
            "impossible": {"requirements": ["torch==1.0.0"]},  # no such wheel for this Python: the build fails
        },
        "models": {"stages": ["eager"], "paths": [str(MODELS / "item_call.py")]},
    }))
    out = tmp_path / "out"
    built = run_cli("matrix", str(tmp_path / "matrix.yaml"), "--build-only", "--out", str(out), timeout=1800)
    assert built.returncode == 1, built.stdout + built.stderr
    assert re.search(r"environment torch-2.13: (reusing|built in)", built.stdout)
    assert "environment offline: unavailable, and optional" in built.stdout
    assert "environment impossible: build failed" in built.stdout
    assert not (out / "cells").exists() or not list((out / "cells").iterdir()), "a cell ran"

    only = run_cli("matrix", str(tmp_path / "matrix.yaml"), "--build-only", "--cell", "torch-2.13/item_call",
                   "--out", str(out), timeout=600)
    assert only.returncode == 0 and "environment torch-2.13: reusing" in only.stdout, only.stdout + only.stderr
    assert "impossible" not in only.stdout
