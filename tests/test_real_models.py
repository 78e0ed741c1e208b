"""Real third-party architectures (models/real: transformers, timm, torchvision; tiny configs, random
weights): each gets the verdicts in its EXPECTED table and the findings in EXPECTED_FINDINGS (kind,
the user's line, and for a cause in library code the library file), from the suite's one run per
model (tests/shared_runs.py) with the stages and options its TEST_OPTIONS name. They run with the python of COMPATCHECK_REAL_PYTHON."""

import pytest

from tests.conftest import REAL_PYTHON
from tests.shared_runs import REAL_FILES, literal

needs_real = pytest.mark.skipif(
    not REAL_PYTHON, reason="COMPATCHECK_REAL_PYTHON is not set: the python of an environment with torch 2.14.1, "
                            "torchvision, timm and transformers (.ci/run builds one)")


def test_every_real_model_states_verdicts_findings_and_options():
    assert len(REAL_FILES) >= 6
    for path in REAL_FILES:
        assert literal(path, "EXPECTED_FINDINGS") is not None and literal(path, "TEST_OPTIONS") is not None, path


def code_line(path, start):
    """The one line of code that starts with `start` (the tables quoting it do not)."""
    lines = [n for n, line in enumerate(path.read_text().splitlines(), 1) if line.strip().startswith(start)]
    assert len(lines) == 1, f"{start!r} starts lines {lines} of {path.name}"
    return lines[0]


@pytest.fixture(params=REAL_FILES, ids=[p.stem for p in REAL_FILES])
def real_run(request, shared_runs):
    """(path, process, report dict, checklist text) from the suite's one run of a real model."""
    run = shared_runs.get(request.param)
    return request.param, run.process, run.report, (run.folder / "checklist.md").read_text()


@needs_real
@pytest.mark.slow
def test_real_model_verdicts(real_run):
    path, proc, report, _ = real_run
    expected = literal(path, "EXPECTED")
    assert {s["name"]: s["status"] for s in report["stages"]} == expected, proc.stdout
    assert proc.returncode == (0 if set(expected.values()) <= {"pass", "skip"} else 1)


@needs_real
@pytest.mark.slow
def test_real_model_findings(real_run):
    """Each expected finding: its kind at the user's line (or none), with the library file where it happened."""
    path, _, report, _ = real_run
    for want in literal(path, "EXPECTED_FINDINGS"):
        line = code_line(path, want["line"]) if want.get("line") else None
        matches = [f for f in report["findings"] if f["stage"] == want["stage"] and f["kind"] == want["kind"]
                   and f["line"] == line and f["library_file"] == want.get("library_file")]
        assert matches, f"{path.stem}: {want} not among {[(f['stage'], f['kind'], f['line'], f['library_file']) for f in report['findings']]}"
        for finding in matches:
            if line:
                assert finding["file"] == path.name
            if want.get("library_file"):  # a library's code is not the user's to rewrite: advice instead
                assert finding["library_line"] and finding["library_code"] and finding["advice"]
                assert finding["rewrite"] is None
            for text in want.get("says", []):
                assert text in finding["message"] + (finding["advice"] or "") + (finding["rewrite"] or ""), finding


@needs_real
@pytest.mark.slow
def test_real_model_routes(real_run):
    """Routes summarize the stages: a route is blocked exactly when one of its required stages failed."""
    path, proc, report, checklist = real_run
    expected_routes = literal(path, "EXPECTED_ROUTES")
    routes = {r["name"]: r["status"] for r in report["routes"]}
    if expected_routes is not None:
        assert {k: routes[k] for k in expected_routes} == expected_routes, report["routes"]
    for route in report["routes"]:
        assert f"route {route['name']}" in proc.stdout or not proc.stdout
        assert route["name"] in checklist
