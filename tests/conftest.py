import json
import os
import subprocess
import sys
from pathlib import Path

import pytest

from tests.scheduling import pytest_xdist_make_scheduler  # noqa: F401 - a module sharing a fixture runs on one worker

# The suite runs a check on each core at once, and each check's torch threads would spin on both cores
# while they wait for work (OpenMP's default), taking the other's core: a third of a conv net's CPU time.
# Threads that sleep while they wait leave torch's thread count, and so every result, as it was.
os.environ.setdefault("OMP_WAIT_POLICY", "PASSIVE")

ROOT = Path(__file__).resolve().parents[1]
MODELS = ROOT / "models"
# Real third-party architectures (transformers, timm, torchvision): they need an environment where
# those import, which the PyPI torchvision does beside torch 2.14.1; .ci/run builds it and names its
# python in COMPATCHECK_REAL_PYTHON.
REAL_MODELS = MODELS / "real"
REAL_PYTHON = os.environ.get("COMPATCHECK_REAL_PYTHON")


def run_cli(*args: str, timeout: float = 600, cwd: Path | None = None, env: dict | None = None,
            python: str | None = None, base_env: dict | None = None):
    """Run `compatcheck` as a user would, in a subprocess (of `python`, default this interpreter), with
    `env` over `base_env` (default this process's environment)."""
    full_env = {**(os.environ if base_env is None else base_env), "COLUMNS": "200", **(env or {})}
    return subprocess.run(
        [python or sys.executable, "-m", "compatcheck", *args], capture_output=True, text=True, timeout=timeout,
        cwd=cwd or ROOT, env=full_env,
    )


def run_json(tmp_path: Path, *args: str, timeout: float = 600):
    """Run compatcheck with --json and return (process, report dict)."""
    out = tmp_path / "report.json"
    proc = run_cli(*args, "--json", str(out), "--quiet", timeout=timeout)
    assert out.exists(), f"no report written\nstdout:{proc.stdout}\nstderr:{proc.stderr}"
    return proc, json.loads(out.read_text())


def verdicts(report: dict) -> dict[str, str]:
    return {stage["name"]: stage["status"] for stage in report["stages"]}


def private_homes(folder: Path) -> dict[str, str]:
    """The variables that give the runs started with them a result cache and a cache key of their own, in
    `folder`: none of them reads or writes the user's (~/.cache, ~/.local/state)."""
    return {"COMPATCHECK_CACHE_DIR": str(folder / "cache"), "XDG_STATE_HOME": str(folder / "state")}


def use_private_homes(patch: pytest.MonkeyPatch, folder: Path) -> None:
    """Sets private_homes(folder) in the environment, and no cache key from it."""
    for name, value in private_homes(folder).items():
        patch.setenv(name, value)
    patch.delenv("COMPATCHECK_CACHE_KEY", raising=False)


@pytest.fixture(scope="module", autouse=True)
def private_module_cache(tmp_path_factory):
    """A module's own fixtures (made before any test's private_cache) get a result cache and a key of the
    module's own."""
    with pytest.MonkeyPatch.context() as patch:
        use_private_homes(patch, tmp_path_factory.mktemp("module"))
        yield


@pytest.fixture(autouse=True)
def private_cache(tmp_path_factory, monkeypatch):
    """Each test starts with an empty result cache of its own, and a cache key of its own. They live
    beside tmp_path, not in it: the worker's sandbox lets it make nothing new in a folder above them
    (docs/isolation.md), and the tests' models write their flags into tmp_path."""
    use_private_homes(monkeypatch, tmp_path_factory.mktemp("private"))


def cache_dir() -> Path:
    """The test's own result cache (private_cache)."""
    return Path(os.environ["COMPATCHECK_CACHE_DIR"])


# The shared runs (tests/shared_runs.py) the collected tests read, in the order they read them.
SHARED_RUNS: list[Path] = []
# The environment the session started with, before any test could change it: the shared runs get it.
SESSION_ENVIRON = dict(os.environ)


@pytest.fixture(scope="session")
def shared_runs(tmp_path_factory):
    """The suite's expensive runs, each made once for every process of the suite (tests/shared_runs.py),
    in a folder the pytest-xdist workers share: the parent of each one's own temporary folder."""
    from tests.shared_runs import SharedRuns

    base = tmp_path_factory.getbasetemp()
    shared = base.parent if "PYTEST_XDIST_WORKER" in SESSION_ENVIRON else base
    return SharedRuns(SHARED_RUNS, shared / "shared-runs", SESSION_ENVIRON)


def reads_shared_runs(item) -> bool:
    return "shared_runs" in getattr(item, "fixturenames", ())


def pytest_itemcollected(item):
    """A test that reads the shared runs waits for whole models walked down the ladder: it is `slow`
    wherever it is, so the fast subset (-m "not slow") walks none."""
    if reads_shared_runs(item):
        item.add_marker(pytest.mark.slow)


@pytest.hookimpl(trylast=True)  # after -k and -m have deselected what will not run
def pytest_collection_modifyitems(items):
    """Tests that read the shared runs go last, together; SHARED_RUNS lists the runs they read, in order."""
    from tests.shared_runs import wanted

    items.sort(key=reads_shared_runs)
    for item in items:
        if reads_shared_runs(item) and hasattr(item, "callspec"):
            SHARED_RUNS.extend(path for path in wanted(item.callspec.params) if path not in SHARED_RUNS)


@pytest.fixture
def write_model(tmp_path):
    """Write a model file from source text and return its path."""

    def write(source: str, name: str = "model.py") -> Path:
        path = tmp_path / name
        path.write_text(source)
        return path

    return write


# A team's test suite with deliberately failing tests: tests/test_pytest_plugin.py runs it in a subprocess.
collect_ignore = ["user_suite"]
