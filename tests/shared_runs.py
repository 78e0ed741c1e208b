"""The suite's expensive, independent runs, read by several tests: each example model's walk down the
ladder and its reproducers (test_models, test_findings, test_docs), and each real architecture's run
(test_real_models). A model is walked once per suite, not once per aspect, however many processes
(pytest-xdist workers) run the suite: the first to need a run makes it, under a lock in a folder the
workers share, and writes it there for the others. conftest moves the tests that read the runs to the
end, together, and a worker that finds the run it needs under way makes the next one nobody has begun,
so both cores stay busy. The runs get the environment the session started with, so a test's
monkeypatched variables (a private TMPDIR, a process mark) never reach them."""

from __future__ import annotations

import ast
import fcntl
import json
import shutil
import subprocess
from contextlib import contextmanager
from dataclasses import dataclass
from pathlib import Path

from tests.conftest import MODELS, REAL_MODELS, REAL_PYTHON, private_homes, run_cli
from tests.reproducers import Reproducers


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
# once (export failed) and on the conv net in tests/test_export.py; the other aot_inductor cells of
# the docs' verdict table come from a full run. OpenVINO runs on the models that show each of its
# verdicts (the precision its defaults chose, a frozen branch, a pass; tests/test_openvino.py has the
# op it cannot convert); its other cells come from a full run too (2-5 s a model, with the recipes).
OPENVINO_MODELS = {"convnet", "data_dependent_if", "where_scatter_gather"}


def stages_to_run(expected: dict, stem: str) -> dict:
    left_out = set() if expected.get("aot_inductor") == "skip" else {"aot_inductor"}
    left_out |= set() if stem in OPENVINO_MODELS else {"openvino"}
    return {name: verdict for name, verdict in expected.items() if name not in left_out}


# `compile` runs with inductor on the models whose ops it lowers in ways of their own (convolutions,
# an int8 matmul, scatter/gather and where); on the others with aot_eager, which meets the same graph
# breaks and dynamo failures without generating C++ (inductor spends 10-20 s a model on a cold cache).
# A full run with inductor gives every model the same compile verdicts (the docs' verdict table).
# data_dependent_if is walked as the docs run it, `compatcheck run models/data_dependent_if.py`: every
# stage (its EXPECTED names them all) with the default backend, so tests/test_docs.py renders the
# docs' output blocks from this run instead of running the model again.
INDUCTOR_MODELS = {"convnet", "int8_matmul", "where_scatter_gather", "data_dependent_if"}

EXAMPLE_FILES = sorted(p for p in MODELS.glob("*.py") if expected_verdicts(p))
REAL_FILES = sorted(p for p in REAL_MODELS.glob("*.py") if literal(p, "EXPECTED"))


@dataclass
class Run:
    process: subprocess.CompletedProcess
    report: dict
    folder: Path
    # stage name -> {"code": exit code, "stdout": what it printed} of the stage's reproducer
    reproduced: dict[str, dict]


def walk_example(path: Path, folder: Path, environ: dict) -> Run:
    """`compatcheck run` of the stages the model's EXPECTED table names (compile with the backend
    INDUCTOR_MODELS says), with --artifacts, then every reproducer of a stage that reached a verdict."""
    stages = ",".join(stages_to_run(expected_verdicts(path), path.stem))
    backend = "inductor" if path.stem in INDUCTOR_MODELS else "aot_eager"
    artifacts = folder / "artifacts"
    proc = run_cli("run", str(path), "--stages", stages, "--compile-backend", backend,
                   "--artifacts", str(artifacts), "--json", str(folder / "report.json"), "--quiet",
                   env=private_homes(folder), base_env=environ)
    assert (folder / "report.json").exists(), f"no report written\nstdout:{proc.stdout}\nstderr:{proc.stderr}"
    report = json.loads((folder / "report.json").read_text())
    reached = [stage["name"] for stage in report["stages"] if stage["status"] != "skip"]
    scripts = [artifacts / f"reproduce_{name}.py" for name in reached]
    by_script = Reproducers(environ).run(scripts, folder)
    return Run(proc, report, folder, {name: by_script[str(script)] for name, script in zip(reached, scripts)})


def run_real(path: Path, folder: Path, environ: dict) -> Run:
    """`compatcheck run` of a real architecture with the python of COMPATCHECK_REAL_PYTHON, writing the
    report and the Markdown checklist."""
    stages = ",".join(literal(path, "EXPECTED"))
    proc = run_cli("run", str(path), "--stages", stages, *literal(path, "TEST_OPTIONS"),
                   "--json", str(folder / "report.json"), "--markdown", str(folder / "checklist.md"), "--quiet",
                   env=private_homes(folder), base_env=environ, python=REAL_PYTHON,
                   timeout=900)
    assert (folder / "report.json").exists(), proc.stdout + proc.stderr
    return Run(proc, json.loads((folder / "report.json").read_text()), folder, {})


def wanted(params: dict) -> list[Path]:
    """The shared runs a collected test reads, from its parameters (a model's path, or its stem)."""
    known = {**{p: p for p in EXAMPLE_FILES}, **{p.stem: p for p in EXAMPLE_FILES},
             **{p: p for p in REAL_FILES if REAL_PYTHON}}
    return [known[value] for value in params.values() if isinstance(value, (str, Path)) and value in known]


class SharedRuns:
    """The runs of `paths`, each made once under `root`, a folder every process of the suite shares: a
    run's lock file, and its result once made (the run's folder and `run.json`)."""

    def __init__(self, paths: list[Path], root: Path, environ: dict):
        self.paths, self.root, self.environ = paths, root, environ
        root.mkdir(parents=True, exist_ok=True)

    def get(self, path: Path) -> Run:
        """The run of `path`. While another process makes it, this one makes the next run nobody has begun,
        then waits for it (a process that died making it left it to be made again)."""
        while (run := self._read(path)) is None:
            if not any(self._make(candidate) for candidate in [path, *self.paths]):
                with self._lock(path, wait=True):
                    pass
        return run

    def _folder(self, path: Path) -> Path:
        return self.root / f"{path.parent.name}-{path.stem}"

    @contextmanager
    def _lock(self, path: Path, wait: bool):
        """Holds the run's lock (yields True), or yields False at once where another process holds it and
        `wait` is false."""
        with open(self.root / f"{self._folder(path).name}.lock", "w") as handle:
            try:
                fcntl.flock(handle, fcntl.LOCK_EX | (0 if wait else fcntl.LOCK_NB))
            except BlockingIOError:
                yield False
                return
            yield True

    def _make(self, path: Path) -> bool:
        """Makes the run of `path` if no process has made or begun it; True if this call made it. A run that
        raised records the error, for the tests that read it (not the one that happened to make it)."""
        with self._lock(path, wait=False) as held:
            if not held or (self._folder(path) / "run.json").exists():
                return False
            folder = self._folder(path)
            shutil.rmtree(folder, ignore_errors=True)  # what a process that died making it left
            folder.mkdir()
            try:
                run = (walk_example if path in EXAMPLE_FILES else run_real)(path, folder, self.environ)
                made = {"args": run.process.args, "returncode": run.process.returncode,
                        "stdout": run.process.stdout, "stderr": run.process.stderr, "reproduced": run.reproduced}
            except Exception as exc:  # noqa: BLE001 - the tests that read this run fail with it
                made = {"error": f"{type(exc).__name__}: {exc}"}
            (folder / "run.json.partial").write_text(json.dumps(made))
            (folder / "run.json.partial").rename(folder / "run.json")
            return True

    def _read(self, path: Path) -> Run | None:
        result = self._folder(path) / "run.json"
        if not result.exists():
            return None
        made = json.loads(result.read_text())
        if "error" in made:
            raise AssertionError(f"the shared run of {path.name} failed: {made['error']}")
        process = subprocess.CompletedProcess(made["args"], made["returncode"], made["stdout"], made["stderr"])
        report = json.loads((self._folder(path) / "report.json").read_text())
        return Run(process, report, self._folder(path), made["reproduced"])
