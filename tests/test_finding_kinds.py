"""One vocabulary of findings: every kind is declared once (compatcheck/report/kinds.py), the report
refuses any other, every declared kind is made somewhere, and every finding is made in diagnose/."""

import ast
import json

import pytest
from pydantic import ValidationError

from compatcheck.report.kinds import KINDS, NAMES
from compatcheck.report.model import Finding
from tests.conftest import ROOT, run_cli

PACKAGE = ROOT / "compatcheck"
# The functions that take a kind, and the position it has among their arguments.
KIND_AT = {"finding_at": 2, "plain": 1, "error_finding": 3, "node_finding": 3, "_frontend_finding": 3,
           "_module_finding": 1, "_tracer_finding": None, "stage_findings": None}


def _name(call: ast.Call) -> str:
    return call.func.id if isinstance(call.func, ast.Name) else getattr(call.func, "attr", "")


def _strings(node) -> set[str]:
    """The string constants `node` can be: itself, or either branch of a conditional."""
    if isinstance(node, ast.Constant) and isinstance(node.value, str):
        return {node.value}
    if isinstance(node, ast.IfExp):
        return _strings(node.body) | _strings(node.orelse)
    return set()


def kinds_in(text: str) -> set[str]:
    """The kinds code passes to the functions that make findings, or assigns to a KIND."""
    found = set()
    for node in ast.walk(ast.parse(text)):
        if isinstance(node, ast.Call) and _name(node) in {*KIND_AT, "Finding"}:
            at = KIND_AT.get(_name(node))
            if at is not None and len(node.args) > at:
                found |= _strings(node.args[at])
            found |= {value for keyword in node.keywords if keyword.arg == "kind" for value in _strings(keyword.value)}
        if isinstance(node, ast.Assign) and any(getattr(t, "id", "").endswith("KIND") for t in node.targets):
            found |= _strings(node.value)
    return found


def findings_made(text: str) -> list[int]:
    """The lines where `text` constructs a Finding."""
    return [node.lineno for node in ast.walk(ast.parse(text))
            if isinstance(node, ast.Call) and _name(node) == "Finding"]


def sources():
    return {path.relative_to(ROOT).as_posix(): path.read_text() for path in PACKAGE.rglob("*.py")}


def test_every_kind_the_package_makes_is_declared_and_every_declared_kind_is_made():
    others = {name: text for name, text in sources().items() if name != "compatcheck/report/kinds.py"}
    made = set().union(*map(kinds_in, others.values()))
    assert made - set(NAMES) == set()
    # Some kinds come from tables (the tracer's warnings): each declared kind is a string somewhere.
    literals = {node.value for text in others.values() for node in ast.walk(ast.parse(text))
                if isinstance(node, ast.Constant) and isinstance(node.value, str)}
    assert set(NAMES) - literals == set()
    assert len(NAMES) == len(set(NAMES)) and all(kind.means and kind.do and kind.stages for kind in KINDS)


def test_the_scan_sees_a_planted_kind():
    planted = 'def f(user):\n    return finding_at(user, "eager", "a-kind-nobody-declared" if x else "device", "m")\n'
    assert kinds_in(planted) == {"a-kind-nobody-declared", "device"}


def test_an_undeclared_kind_is_refused_where_it_is_made_and_where_a_report_is_read(tmp_path):
    with pytest.raises(ValidationError):
        Finding(stage="eager", kind="a-kind-nobody-declared", message="m")
    _, report = _report(tmp_path)
    report["stages"][0]["findings"] = [{"stage": "eager", "kind": "a-kind-nobody-declared", "message": "m"}]
    (tmp_path / "planted.json").write_text(json.dumps(report))
    proc = run_cli("checklist", str(tmp_path / "planted.json"))
    assert proc.returncode != 0 and "Traceback" not in proc.stderr
    assert len(proc.stderr.strip().splitlines()) == 1 and "a-kind-nobody-declared" not in proc.stdout


def _report(tmp_path):
    out = tmp_path / "r.json"
    proc = run_cli("run", str(ROOT / "models/convnet.py"), "--stages", "eager", "--json", str(out), "--quiet")
    return proc, json.loads(out.read_text())


def test_findings_are_made_in_diagnose_alone():
    outside = {name: lines for name, text in sources().items()
               if not name.startswith("compatcheck/diagnose/") and (lines := findings_made(text))}
    assert outside == {}
    assert findings_made("x = Finding(stage='eager', kind='device', message='m')\n") == [1]
