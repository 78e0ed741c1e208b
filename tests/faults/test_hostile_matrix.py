"""matrix.yaml and cell files from jobs that are not trusted: aliases, duplicate keys, installer options,
names and notes that carry HTML, pipes and workflow commands, foreign schema versions, deep nesting and
huge files. Each refusal is one line, exit code 2, no traceback; what is accepted is rendered inert."""

import json
import re
import xml.etree.ElementTree as ET

import pytest

from tests.conftest import ROOT, run_cli
from tests.faults.test_bad_input import assert_one_line_usage_error

ENVIRONMENT = 'environments:\n  torch-2.13:\n    requirements: ["torch==2.13.0"]\n'
MODELS = "models:\n  paths: [models/item_call.py]\n"
BOMB = "".join(f"l{n}: &l{n} [{', '.join([f'*l{n - 1}'] * 9) if n else 'x'}]\n" for n in range(12))


@pytest.mark.parametrize("text, says", [
    (BOMB + ENVIRONMENT + MODELS, ":2: YAML aliases (*l0) are not allowed in a matrix file: write the value out"),
    (ENVIRONMENT + MODELS + 'environments:\n  other:\n    requirements: ["torch"]\n', ":6: duplicate key 'environments'"),
    (ENVIRONMENT + "    index_url: -r /etc/passwd\n" + MODELS,
     ":4: environments.torch-2.13.index_url: '-r /etc/passwd' starts with '-': give a URL or a path, not an "
     "installer option"),
    (ENVIRONMENT + '    find_links: ["--trusted-host=evil.example"]\n' + MODELS,
     ":4: environments.torch-2.13.find_links: '--trusted-host=evil.example' starts with '-'"),
    (ENVIRONMENT + '    extra_index_urls: [" --pre"]\n' + MODELS,
     ":4: environments.torch-2.13.extra_index_urls: ' --pre' starts with '-'"),
], ids=["alias bomb", "duplicate key", "index_url option", "find_links option", "extra_index_urls option"])
def test_a_hostile_matrix_file_is_one_line_config_error(tmp_path, text, says):
    path = tmp_path / "matrix.yaml"
    path.write_text(text)
    proc = run_cli("matrix", str(path), "--emit", "github", "--out", str(tmp_path / "out"), timeout=60)
    assert_one_line_usage_error(proc, f"error: {path}{says}")


HOSTILE = "\x1b[2J<script>alert(1)</script> | cell | \u202e\n::error::forged\n::warning file=x::too"


def cell(**changes) -> dict:
    report = json.loads((ROOT / "tests" / "data" / "report_v2.json").read_text())
    report["stages"][2]["findings"][0]["message"] = report["stages"][2]["reason"] = HOSTILE  # jit_trace: mismatch
    report["environment"]["torch"] = "2.13.0<img src=x>|"
    return {"cell_schema_version": 1, "environment": "torch-2.13", "model": "net", "target": "/m/net.py",
            "order": [0, 0], "key": "k", "requirements": ["torch==2.13.0"], "report": report, **changes}


def test_notes_and_versions_from_a_cell_file_land_inert_in_every_merged_file(tmp_path):
    path, baseline, out = tmp_path / "cell.json", tmp_path / "baseline.yaml", tmp_path / "out"
    data = cell()
    path.write_text(json.dumps(data))
    stage = data["report"]["stages"][2]["name"]
    baseline.write_text(json.dumps({"environments": {"torch-2.13": {"models": {"net": {stage: "pass"}}}}}))
    proc = run_cli("merge", str(path), "--baseline", str(baseline), "--out", str(out), timeout=60)
    assert proc.returncode == 1 and "Traceback" not in proc.stderr, proc.stdout + proc.stderr
    assert "new-failure: torch-2.13/net" in proc.stdout
    matrix_md = (out / "matrix.md").read_text()
    for text in (proc.stdout, proc.stderr, matrix_md):
        assert not re.search(r"^\s*::", text, re.MULTILINE), text
        assert "\x1b" not in text and "\u202e" not in text
    assert "\\<script\\>" in matrix_md and not re.search(r"(?<!\\)<(script|img)", matrix_md)
    assert "\\| cell \\|" in matrix_md
    assert ET.fromstring((out / "junit.xml").read_text()).tag == "testsuites"


@pytest.mark.parametrize("changes, says", [
    ({"environment": "<b>x</b>|y"}, "at environment"),
    ({"model": "net\n::error::forged"}, "at model"),
    ({"report": {**cell()["report"], "schema_version": 99}},
     "its report has schema_version 99; this compatcheck reads schema_version 1 to"),
], ids=["html environment name", "workflow command model name", "report schema 99"])
def test_merge_refuses_a_cell_file_with_names_matrix_yaml_forbids_or_a_foreign_report(tmp_path, changes, says):
    path = tmp_path / "cell.json"
    path.write_text(json.dumps(cell(**changes)))
    proc = run_cli("merge", str(path), "--out", str(tmp_path / "out"), timeout=60)
    assert_one_line_usage_error(proc, f"error: {path}: ")
    assert says in proc.stderr and not (tmp_path / "out" / "matrix.md").exists()


def nested(depth: int) -> str:
    return "[" * depth + "]" * depth


@pytest.mark.parametrize("command, text, says", [
    ("merge", nested(100_000), "it nests deeper than 64 levels"),
    ("merge", json.dumps({**cell(), "padding": "x" * (16 * 2**20)}), "it is larger than 16 MB"),
    ("checklist", '{"schema_version": 4, "stages": ' + nested(100) + "}", "it nests deeper than 64 levels"),
    ("checklist", nested(100_000), "it nests deeper than 64 levels"),
], ids=["deep cell", "huge cell", "deep report", "very deep report"])
def test_deep_or_huge_json_is_one_line_not_a_recursion_error(tmp_path, command, text, says):
    path = tmp_path / "input.json"
    path.write_text(text)
    args = [command, str(path), *(["--out", str(tmp_path / "out")] if command == "merge" else [])]
    what = "cell file" if command == "merge" else "report"
    assert_one_line_usage_error(run_cli(*args, timeout=60), f"error: cannot read {what} {path}: {says}")

