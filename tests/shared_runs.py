"""The suite's expensive, independent runs, started two at a time in the background and read by several
tests: each example model's walk down the ladder and its reproducers (test_models, test_findings), and
each real architecture's run (test_real_models). A model is walked once per suite, not once per
aspect, and the two cores stay busy while the tests that read the runs check them one by one
(conftest moves those tests to the end, together, so nothing timing-sensitive runs beside the pool)."""

from __future__ import annotations

import ast
import json
import subprocess
import sys
from concurrent.futures import Future, ThreadPoolExecutor
from dataclasses import dataclass
from pathlib import Path

from tests.conftest import MODELS, REAL_MODELS, REAL_PYTHON, run_cli


def literal(path: Path, name: str):
    """The value of a model file's module-level `NAME = <literal>`, or None."""
    for node in ast.parse(path.read_text()).body:
        if isinstance(node, ast.Assign) and any(getattr(t, "id", None) == name for t in node.targets):
            return ast.literal_eval(node.value)
    return None


def expected_verdicts(path: Path) -> dict | None:
    """An example model's EXPECTED table: {stage: verdict}."""
    return literal(path, "EXPECTED")


# AOTInductor compiles C++ (about 45 s per model on 2 cores), so the suite runs it where it skips at
# once (export failed) and on the conv net in tests/test_export.py; the README's other aot_inductor
# cells come from a full run.
def stages_to_run(expected: dict) -> dict:
    if expected.get("aot_inductor") == "skip":
        return dict(expected)
    return {name: verdict for name, verdict in expected.items() if name != "aot_inductor"}


# `compile` runs with inductor on the models whose ops it lowers in ways of their own (convolutions,
# an int8 matmul, scatter/gather and where); on the others with aot_eager, which meets the same graph
# breaks and dynamo failures without generating C++ (inductor spends 10-20 s a model on a cold cache).
# A full run with inductor gives every model the same compile verdicts (the README's table).
INDUCTOR_MODELS = {"convnet", "int8_matmul", "where_scatter_gather"}

EXAMPLE_FILES = sorted(p for p in MODELS.glob("*.py") if expected_verdicts(p))
REAL_FILES = sorted(p for p in REAL_MODELS.glob("*.py") if literal(p, "EXPECTED"))

# Runs every reproducer given in one interpreter (torch is imported once) and reports each one's exit
# code and output as JSON in the file named first.
RUN_REPRODUCERS = """
import contextlib, io, json, runpy, sys
results = {}
for script in sys.argv[2:]:
    out = io.StringIO()
    code = 0
    with contextlib.redirect_stdout(out):
        try:
            runpy.run_path(script, run_name="__main__")
        except SystemExit as exc:
            code = exc.code
    results[script] = {"code": code, "stdout": out.getvalue()}
open(sys.argv[1], "w").write(json.dumps(results))
"""


@dataclass
class Run:
    process: subprocess.CompletedProcess
    report: dict
    folder: Path
    # stage name -> {"code": exit code, "stdout": what it printed} of the stage's reproducer
    reproduced: dict[str, dict]


def walk_example(path: Path, folder: Path) -> Run:
    """`compatcheck run` of the stages the model's EXPECTED table names (compile with the backend
    INDUCTOR_MODELS says), with --artifacts, then every reproducer of a stage that reached a verdict."""
    stages = ",".join(stages_to_run(expected_verdicts(path)))
    backend = "inductor" if path.stem in INDUCTOR_MODELS else "aot_eager"
    artifacts = folder / "artifacts"
    proc = run_cli("run", str(path), "--stages", stages, "--compile-backend", backend,
                   "--artifacts", str(artifacts), "--json", str(folder / "report.json"), "--quiet",
                   env={"COMPATCHECK_CACHE_DIR": str(folder / "cache")})
    assert (folder / "report.json").exists(), f"no report written\nstdout:{proc.stdout}\nstderr:{proc.stderr}"
    report = json.loads((folder / "report.json").read_text())
    reached = [stage["name"] for stage in report["stages"] if stage["status"] != "skip"]
    scripts = [str(artifacts / f"reproduce_{name}.py") for name in reached]
    results = folder / "reproduced.json"
    subprocess.run([sys.executable, "-c", RUN_REPRODUCERS, str(results), *scripts], cwd=folder,
                   capture_output=True, timeout=900, check=True)
    by_script = json.loads(results.read_text())
    return Run(proc, report, folder, {name: by_script[script] for name, script in zip(reached, scripts)})


def run_real(path: Path, folder: Path) -> Run:
    """`compatcheck run` of a real architecture with the python of COMPATCHECK_REAL_PYTHON, writing the
    report and the Markdown checklist."""
    stages = ",".join(literal(path, "EXPECTED"))
    proc = run_cli("run", str(path), "--stages", stages, *literal(path, "TEST_OPTIONS"),
                   "--json", str(folder / "report.json"), "--markdown", str(folder / "checklist.md"), "--quiet",
                   env={"COMPATCHECK_CACHE_DIR": str(folder / "cache")}, python=REAL_PYTHON, timeout=900)
    assert (folder / "report.json").exists(), proc.stdout + proc.stderr
    return Run(proc, json.loads((folder / "report.json").read_text()), folder, {})


class SharedRuns:
    """Submits every shared run on first use, in the order the tests read them; `get` waits for one."""

    def __init__(self, make_folder):
        self.make_folder = make_folder
        self.pool = ThreadPoolExecutor(2, thread_name_prefix="shared-run")
        self.futures: dict[Path, Future] = {}

    def get(self, path: Path) -> Run:
        if not self.futures:
            jobs = [(walk_example, p) for p in EXAMPLE_FILES] + [(run_real, p) for p in REAL_FILES if REAL_PYTHON]
            for job, p in jobs:
                self.futures[p] = self.pool.submit(job, p, self.make_folder(p.stem))
        return self.futures[path].result()

    def close(self) -> None:
        self.pool.shutdown(wait=True, cancel_futures=True)  # after a failure (-x), only the running jobs finish
