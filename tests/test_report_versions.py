"""Reports of an earlier schema_version (tests/data/report_v2.json, written by the compatcheck before
schema_version 3) are still read by `checklist`, `merge` and `--resume`; other versions are refused."""

import json
import shutil

from compatcheck.matrix.cells import CELL_SCHEMA_VERSION
from compatcheck.report.model import SCHEMA_VERSION, load_report
from tests.conftest import MODELS, ROOT, run_cli

OLD = ROOT / "tests" / "data" / "report_v2.json"


def test_an_old_report_loads_with_its_options_under_todays_names():
    assert json.loads(OLD.read_text())["schema_version"] == 2 < SCHEMA_VERSION
    report = load_report(OLD)
    assert report.schema_version == SCHEMA_VERSION
    assert {"memory_limit", "triton", "bench"} <= set(report.options)
    assert not {"memory_limit_mb", "triton_launcher"} & set(report.options)
    assert report.options["bench"] is False and report.options["triton"] == "local"


def test_checklist_reads_an_old_report():
    proc = run_cli("checklist", str(OLD), timeout=60)
    assert proc.returncode == 0, proc.stderr
    assert "frozen-control-flow" in proc.stdout and "data_dependent_if.py:27" in proc.stdout


def _cell(report: dict) -> dict:
    return {"cell_schema_version": CELL_SCHEMA_VERSION, "environment": "torch-old", "model": "data_dependent_if",
            "target": "/m/data_dependent_if.py", "order": [0, 0], "key": "k", "report": report}


def test_merge_reads_a_cell_holding_an_old_report_and_refuses_an_unknown_version(tmp_path):
    cell = tmp_path / "torch-old__data_dependent_if.json"
    cell.write_text(json.dumps(_cell(json.loads(OLD.read_text()))))
    proc = run_cli("merge", str(cell), "--out", str(tmp_path / "out"), timeout=60)
    assert proc.returncode == 0, proc.stderr
    assert "data_dependent_if" in (tmp_path / "out" / "matrix.md").read_text()
    future = tmp_path / "torch-new__data_dependent_if.json"
    future.write_text(json.dumps(_cell({**json.loads(OLD.read_text()), "schema_version": 99})))
    proc = run_cli("merge", str(future), "--out", str(tmp_path / "out2"), timeout=60)
    assert proc.returncode == 2 and proc.stderr.count("\n") == 1
    assert "schema_version 99" in proc.stderr and "Traceback" not in proc.stderr


def test_resume_reads_an_old_report_and_says_why_it_resumes_nothing(tmp_path):
    report = tmp_path / "report.json"
    shutil.copyfile(OLD, report)
    proc = run_cli("run", str(MODELS / "data_dependent_if.py"), "--stages", "eager", "--json", str(report),
                   "--resume", "-q")
    assert proc.returncode == 0, proc.stderr
    assert "--resume: nothing resumed, every stage runs again" in proc.stderr
    assert json.loads(report.read_text())["schema_version"] == SCHEMA_VERSION
