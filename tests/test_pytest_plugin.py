"""The pytest plugin as a team uses it: their own suite (tests/user_suite), run by pytest in a subprocess."""

import json
import subprocess
import sys
from xml.etree import ElementTree

import pytest

from tests.conftest import ROOT

SUITE = ROOT / "tests" / "user_suite" / "test_deployable.py"


def run_pytest(folder, *args, timeout=900):
    return subprocess.run([sys.executable, "-m", "pytest", "-p", "no:cacheprovider", *args],
                          cwd=folder, capture_output=True, text=True, timeout=timeout)


def suite_properties(junit) -> dict[str, str]:
    suite = ElementTree.parse(junit).getroot().find("testsuite")
    return {p.get("name"): p.get("value") for p in suite.findall("properties/property")}


def case_properties(junit) -> dict[str, dict[str, str]]:
    return {case.get("name"): {p.get("name"): p.get("value") for p in case.iter("property")}
            for case in ElementTree.parse(junit).getroot().iter("testcase")}


def line_of(text: str, path) -> int:
    return next(n for n, line in enumerate(path.read_text().splitlines(), 1) if text in line)


@pytest.mark.slow
def test_a_team_suite_fails_on_the_models_line_and_survives_a_segfault(tmp_path):
    (tmp_path / SUITE.name).write_text(SUITE.read_text())
    reports = tmp_path / "reports"
    proc = run_pytest(tmp_path, SUITE.name, "--junitxml=junit.xml", f"--compatcheck-report={reports}",
                      "--compatcheck-option", "cache=false")
    out = proc.stdout
    assert proc.returncode == 1, out + proc.stderr
    assert "2 failed, 2 passed" in out, out
    # The data-dependent branch: the failure names the line in the test file, shows it, and the rewrite.
    gate = out.split("test_gate_deploys_to_onnx", 2)[-1]
    assert f"{SUITE.name}:{line_of('if x.sum() > 0:', SUITE)}: data-dependent-guard" in gate
    assert "> if x.sum() > 0:" in gate and "torch.where(" in gate
    # The segfault killed a worker, not pytest: that test fails with the verdict, the next ones ran.
    assert "eager: crash: the worker was killed by SIGSEGV" in out
    properties = suite_properties(tmp_path / "junit.xml")
    gate, segfaults, mlp = (f"compatcheck:{SUITE.name}::{name}:" for name in (
        "test_gate_deploys_to_onnx", "test_segfaulting_model_deploys_to_onnx", "test_mlp_deploys_to_onnx"))
    assert {name: properties[gate + name] for name in ("eager", "onnx_export", "onnxruntime")} == {
        "eager": "pass", "onnx_export": "fail", "onnxruntime": "skip"}
    assert properties[segfaults + "eager"] == "crash"
    assert all(properties[mlp + name] == "pass" for name in ("eager", "onnx_export", "onnxruntime"))
    written = sorted(p.name for p in reports.iterdir())
    assert written == sorted(f"test_deployable.py_{name}.{ext}" for name in
                             ("test_gate_deploys_to_onnx", "test_segfaulting_model_deploys_to_onnx",
                              "test_mlp_deploys_to_onnx") for ext in ("json", "md"))
    gate_report = json.loads((reports / "test_deployable.py_test_gate_deploys_to_onnx.json").read_text())
    assert gate_report["findings"][0]["file"] == SUITE.name


def test_the_plugin_costs_nothing_when_unused(tmp_path):
    (tmp_path / "test_plain.py").write_text(
        "import sys\n\n"
        "def test_nothing_heavy_was_imported(request):\n"
        "    assert request.config.pluginmanager.has_plugin('compatcheck')\n"
        "    assert 'torch' not in sys.modules and 'compatcheck.api' not in sys.modules\n")
    proc = run_pytest(tmp_path, "test_plain.py", timeout=120)
    assert proc.returncode == 0, proc.stdout + proc.stderr


def test_a_bad_plugin_option_is_a_usage_error(tmp_path):
    (tmp_path / "test_one.py").write_text("def test_one(compatcheck):\n    compatcheck.check('m.py')\n")
    proc = run_pytest(tmp_path, "test_one.py", "--compatcheck-option", "timeout", timeout=120)
    assert "expected NAME=VALUE" in proc.stdout + proc.stderr and proc.returncode != 0


@pytest.mark.parametrize("family", ["xunit1", "xunit2"])
def test_verdicts_reach_the_junit_xml_of_every_family_under_warnings_as_errors(tmp_path, family):
    (tmp_path / "double.py").write_text(
        "import torch\n\n\ndef get_model():\n    return torch.nn.Identity()\n\n\n"
        "def get_inputs():\n    return [(torch.ones(2),)]\n")
    (tmp_path / "test_double.py").write_text(
        "def test_double(compatcheck):\n    compatcheck.check('double.py', stages=['eager'])\n")
    proc = run_pytest(tmp_path, "test_double.py", "-W", "error", "--junitxml=junit.xml", "-o",
                      f"junit_family={family}", timeout=120)
    assert proc.returncode == 0, proc.stdout + proc.stderr
    assert suite_properties(tmp_path / "junit.xml") == {"compatcheck:test_double.py::test_double:eager": "pass"}
    # A test case's own properties only where the family's schema has them.
    cases = {"xunit1": {"compatcheck:eager": "pass"}, "xunit2": {}}
    assert case_properties(tmp_path / "junit.xml") == {"test_double": cases[family]}
