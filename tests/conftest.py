import json
import os
import subprocess
import sys
from pathlib import Path

import pytest

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


@pytest.fixture(autouse=True)
def private_cache(tmp_path_factory, monkeypatch):
    """Each test starts with an empty result cache of its own, and a cache key of its own. They live
    beside tmp_path, not in it: the worker's sandbox lets it make nothing new in a folder above them
    (docs/isolation.md), and the tests' models write their flags into tmp_path."""
    home = tmp_path_factory.mktemp("private")
    monkeypatch.setenv("COMPATCHECK_CACHE_DIR", str(home / "cache"))
    monkeypatch.setenv("XDG_STATE_HOME", str(home / "state"))
    monkeypatch.delenv("COMPATCHECK_CACHE_KEY", raising=False)


def cache_dir() -> Path:
    """The test's own result cache (private_cache)."""
    return Path(os.environ["COMPATCHECK_CACHE_DIR"])


# The shared runs (tests/shared_runs.py) the collected tests read, in the order they read them.
SHARED_RUNS: list[Path] = []


@pytest.fixture(scope="session")
def shared_runs(tmp_path_factory):
    """The suite's expensive runs, started in the background (tests/shared_runs.py)."""
    from tests.shared_runs import SharedRuns

    runs = SharedRuns(SHARED_RUNS, tmp_path_factory.mktemp, dict(os.environ))
    yield runs
    runs.close()


@pytest.fixture(scope="session", autouse=True)
def start_shared_runs(request):
    """Starts the shared runs with the session, before any test can change the environment."""
    if SHARED_RUNS:
        request.getfixturevalue("shared_runs")


@pytest.hookimpl(trylast=True)  # after -k and -m have deselected what will not run
def pytest_collection_modifyitems(items):
    """Tests that read the shared runs go last, together; what they read is started first thing."""
    from tests.shared_runs import wanted

    items.sort(key=lambda item: "shared_runs" in getattr(item, "fixturenames", ()))
    for item in items:
        if "shared_runs" in getattr(item, "fixturenames", ()) and hasattr(item, "callspec"):
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
