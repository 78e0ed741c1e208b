"""Every example model gets exactly the verdicts written in its EXPECTED table, every reproducer
reaches its stage's verdict again, and the docs' verdict table (docs/models.md) says the same. The runs are the
suite's shared ones (tests/shared_runs.py, which also says which compile backend each model gets)."""

import re
import subprocess
import sys

import pytest

from tests.conftest import MODELS, ROOT, verdicts
from tests.shared_runs import EXAMPLE_FILES, expected_verdicts, stages_to_run


def test_every_example_model_states_its_expected_verdicts():
    assert EXAMPLE_FILES and all(expected_verdicts(p) for p in MODELS.glob("*.py"))


def test_every_example_model_expects_a_verdict_from_export_and_aot_inductor():
    for path in EXAMPLE_FILES:
        assert {"export", "aot_inductor"} <= set(expected_verdicts(path)), path.name


SYMBOLS = {"pass": "✅", "mismatch": "❗", "fail": "❌", "skip": "⏭️"}
COLUMNS = {"fullgraph": "compile_fullgraph", "onnx": "onnx_export", "ort": "onnxruntime", "OpenVINO": "openvino"}


def docs_table() -> dict[str, dict[str, str]]:
    """model file -> {stage: symbol} from the docs' verdict table of the example models."""
    section = ROOT.joinpath("docs", "models.md").read_text().split("## Example models", 1)[1].split("\n## ", 1)[0]
    lines = section.splitlines()
    header = next(line for line in lines if line.startswith("| model |"))
    stages = [COLUMNS.get(c.strip(), c.strip()) for c in header.strip("|").split("|")[2:]]
    table = {}
    for line in lines:
        row = re.match(r"\| `(\w+\.py)` \|", line)
        if row:
            cells = [c.strip() for c in line.strip().strip("|").split("|")[2:]]
            table[row.group(1)] = dict(zip(stages, cells))
    return table


def test_docs_verdict_table_matches_every_expected_table():
    """Every stage but triton has a column (the tests run triton only where it skips at once, and on
    the conv net against a real server)."""
    table = docs_table()
    assert set(table) == {p.name for p in EXAMPLE_FILES}
    for path in EXAMPLE_FILES:
        expected = {stage: SYMBOLS[verdict] for stage, verdict in expected_verdicts(path).items()
                    if stage != "triton"}
        # The OpenVINO column of a model whose EXPECTED does not name it is a recorded run, not asserted.
        shown = {stage: cell for stage, cell in table[path.name].items() if stage in expected or stage != "openvino"}
        assert shown == expected, path.name


def expected_lines(stage: dict) -> list[str]:
    """The lines a stage's reproducer prints: a build failure, or one verdict per input set."""
    if stage["status"] == "fail" and not stage["input_sets"]:
        return ["build: fail"]
    if not stage["input_sets"]:
        return ["built and checked; there is nothing to run it with"]
    return [f"input set {s['index'] + 1}: " + ("fail" if s["error"] else "pass" if s["ok"] else "mismatch")
            for s in stage["input_sets"]]


@pytest.mark.slow
@pytest.mark.parametrize("path", EXAMPLE_FILES, ids=[p.stem for p in EXAMPLE_FILES])
def test_example_model_verdicts_and_reproducers(shared_runs, path):
    expected = stages_to_run(expected_verdicts(path), path.stem)
    run = shared_runs.get(path)
    proc, report = run.process, run.report
    assert verdicts(report) == expected, proc.stdout
    assert proc.returncode == (0 if set(expected.values()) <= {"pass", "skip"} else 1)
    # A phase that failed is compatcheck's own error (a diagnosis that raised): none on the example models.
    failed = [(stage["name"], phase["note"]) for stage in report["stages"] for phase in stage["phases"]
              if phase["outcome"] == "failed"]
    assert failed == []
    # What the run depended on is the model file: not the modules inductor compiled and loaded from its cache.
    assert list(report["dependencies"]) == [str(path)]
    for stage in report["stages"]:
        if stage["status"] == "pass":
            ran = [s["index"] for s in stage["input_sets"]]
            assert ran in ([], list(range(report["model"]["input_sets"]))), f"{stage['name']} skipped input sets"

    # Every stage that reached a verdict left a reproducer that reaches it again, input set by input set.
    reached = [stage for stage in report["stages"] if stage["status"] != "skip"]
    assert list(run.reproduced) == [stage["name"] for stage in reached]
    for stage in reached:
        printed = run.reproduced[stage["name"]]["stdout"].splitlines()
        verdict_lines = [line.split(":")[0] + ": " + line.split(": ")[1].split(":")[0] for line in printed
                         if line.startswith(("input set ", "build: "))]
        assert verdict_lines == expected_lines(stage), (stage["name"], printed)
        assert printed[-1].startswith(f"verdict: {stage['status']};"), (stage["name"], printed)
        assert run.reproduced[stage["name"]]["code"] == 0, (stage["name"], printed)


def test_importing_the_package_and_help_do_not_import_torch():
    code = ("import sys, compatcheck, compatcheck.cli\n"
            "from typer.testing import CliRunner\n"
            "result = CliRunner().invoke(compatcheck.cli.app, ['--help'])\n"
            "assert result.exit_code == 0 and 'run' in result.output\n"
            "assert 'torch' not in sys.modules, 'torch was imported'\n")
    subprocess.run([sys.executable, "-c", code], check=True, timeout=60)
