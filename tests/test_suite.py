"""The suite's own rules for its speed (docs/developing.md): a module whose tests share a fixture runs on one
pytest-xdist worker, which makes the fixture once (tests/scheduling.py), and the fast subset walks no model."""

import os
import subprocess
import sys

from tests.conftest import ROOT
from tests.scheduling import shares_a_fixture

SHARING = """
import os
import pytest

def note(file, what):
    with open(os.environ[file], "a") as out:
        out.write(f"{what} {os.environ['PYTEST_XDIST_WORKER']}\\n")

@pytest.fixture(scope="module")
def made():
    note("MADE", "made")

@pytest.mark.parametrize("n", range(6))
def test_reads(made, n):
    note("RAN", "shared")
"""
ALONE = """
import os
import time
import pytest

@pytest.mark.parametrize("n", range(6))
def test_alone(n):
    time.sleep(0.2)
    with open(os.environ["RAN"], "a") as out:
        out.write(f"alone {os.environ['PYTEST_XDIST_WORKER']}\\n")
"""


def test_the_modules_that_share_a_fixture_are_known_from_their_source():
    assert shares_a_fixture(ROOT / "tests" / "test_false_pass.py")  # a module fixture: a corpus of runs
    assert shares_a_fixture(ROOT / "tests" / "conftest.py")  # session fixtures: the shared runs
    assert not shares_a_fixture(ROOT / "tests" / "test_compare.py")


def test_a_module_fixture_is_made_once_by_the_one_worker_that_runs_its_tests(tmp_path):
    (tmp_path / "conftest.py").write_text("from tests.scheduling import pytest_xdist_make_scheduler  # noqa: F401\n")
    (tmp_path / "test_sharing.py").write_text(SHARING)
    (tmp_path / "test_alone.py").write_text(ALONE)
    env = {**os.environ, "PYTHONPATH": str(ROOT), "MADE": str(tmp_path / "made"), "RAN": str(tmp_path / "ran")}
    proc = subprocess.run([sys.executable, "-m", "pytest", "-n", "2", "-p", "no:cacheprovider", "-q"], cwd=tmp_path,
                          env=env, capture_output=True, text=True, timeout=120)
    assert proc.returncode == 0, proc.stdout + proc.stderr
    ran = [line.split() for line in (tmp_path / "ran").read_text().splitlines()]
    assert len(ran) == 12
    made = (tmp_path / "made").read_text().splitlines()
    assert len(made) == 1
    assert {worker for what, worker in ran if what == "shared"} == {made[0].split()[1]}
    assert {worker for _, worker in ran} == {"gw0", "gw1"}  # the other tests were still shared out


def test_the_fast_subset_walks_no_model():
    """Every test that reads the shared runs (whole models walked down the ladder) is `slow`, so
    `-m "not slow"` selects none of them, and the full suite still has them all."""
    def collected(*args):
        proc = subprocess.run([sys.executable, "-m", "pytest", "--co", "-q", "-n0", "-p", "no:cacheprovider", *args],
                              cwd=ROOT, capture_output=True, text=True, timeout=300)
        assert proc.returncode == 0, proc.stdout + proc.stderr
        return {line for line in proc.stdout.splitlines() if "::" in line}

    reading = {test for test in collected() if "takes_every_report_the_suite_produces" in test}
    assert reading  # tests/test_renderers.py reads every shared run and says nothing of speed itself
    assert reading.isdisjoint(collected("-m", "not slow"))
