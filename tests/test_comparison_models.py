"""The comparison's classes of false verdicts through the real stages, on model files of the kind real
models contain (tests/models/comparison): each stage's verdict is what the plain script in the file's
docstring shows."""

from __future__ import annotations

import json
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path

import pytest

from tests.conftest import ROOT, run_cli
from tests.shared_runs import literal

MODELS = sorted(p for p in (ROOT / "tests" / "models" / "comparison").glob("*.py") if literal(p, "EXPECTED"))


@pytest.fixture(scope="module")
def reports(tmp_path_factory) -> dict[str, dict]:
    """Every model's report, two runs at a time."""
    def run(path: Path) -> tuple[str, dict]:
        folder = tmp_path_factory.mktemp(path.stem)
        proc = run_cli("run", str(path), "--stages", ",".join(literal(path, "EXPECTED")), "--compile-backend",
                       "aot_eager", *(literal(path, "OPTIONS") or []), "--json", str(folder / "report.json"), "--quiet",
                       "--no-cache")
        assert (folder / "report.json").exists(), proc.stdout + proc.stderr
        return path.stem, json.loads((folder / "report.json").read_text())

    with ThreadPoolExecutor(2) as pool:
        return dict(pool.map(run, MODELS))


@pytest.mark.parametrize("path", MODELS, ids=[p.stem for p in MODELS])
def test_each_stage_gets_the_verdict_the_plain_script_shows(reports, path):
    stages = {stage["name"]: stage for stage in reports[path.stem]["stages"]}
    assert {name: stages[name]["status"] for name in literal(path, "EXPECTED")} == literal(path, "EXPECTED"), \
        [(stage["name"], stage["reason"]) for stage in stages.values()]


def test_tied_indices_are_accepted_and_counted(reports):
    runtime = next(s for s in reports["topk_ties"]["stages"] if s["name"] == "onnxruntime")
    indices = runtime["input_sets"][0]["leaves"][1]
    assert indices["rule"] == "integers" and "at ties of the values beside them" in (indices["accepted"] or "")


def test_a_tolerance_key_that_names_no_output_stops_the_run_naming_the_outputs(tmp_path):
    proc = run_cli("run", str(ROOT / "tests" / "models" / "comparison" / "tolerance_key.py"), "--stages", "eager",
                   "--no-cache")
    assert proc.returncode == 2, proc.stdout + proc.stderr
    assert "TOLERANCE['prob'] names no output; the outputs are: 0, 1.logits, 1.probs" in proc.stdout + proc.stderr
    assert "Traceback" not in proc.stdout + proc.stderr
