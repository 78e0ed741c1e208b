"""Every example model gets exactly the verdicts written in its EXPECTED table."""

import ast
import subprocess
import sys

import pytest

from tests.conftest import MODELS, run_json, verdicts


def expected_verdicts(path):
    for node in ast.parse(path.read_text()).body:
        if isinstance(node, ast.Assign) and any(getattr(t, "id", None) == "EXPECTED" for t in node.targets):
            return ast.literal_eval(node.value)
    return None


MODEL_FILES = sorted(p for p in MODELS.glob("*.py") if expected_verdicts(p))


def test_every_example_model_states_its_expected_verdicts():
    assert MODEL_FILES and all(expected_verdicts(p) for p in MODELS.glob("*.py"))


@pytest.mark.slow
@pytest.mark.parametrize("path", MODEL_FILES, ids=[p.stem for p in MODEL_FILES])
def test_example_model_verdicts(tmp_path, path):
    expected = expected_verdicts(path)
    proc, report = run_json(tmp_path, "run", str(path), "--stages", ",".join(expected))
    assert verdicts(report) == expected, proc.stdout
    assert proc.returncode == (0 if set(expected.values()) <= {"pass", "skip"} else 1)
    for stage in report["stages"]:
        if stage["status"] == "pass":
            ran = [s["index"] for s in stage["input_sets"]]
            assert ran in ([], list(range(report["model"]["input_sets"]))), f"{stage['name']} skipped input sets"


def test_importing_the_package_and_help_do_not_import_torch():
    code = ("import sys, compatcheck, compatcheck.cli\n"
            "from typer.testing import CliRunner\n"
            "result = CliRunner().invoke(compatcheck.cli.app, ['--help'])\n"
            "assert result.exit_code == 0 and 'run' in result.output\n"
            "assert 'torch' not in sys.modules, 'torch was imported'\n")
    subprocess.run([sys.executable, "-c", code], check=True, timeout=60)
