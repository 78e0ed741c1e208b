"""Right verdicts on the outputs and inputs real models use, randomness the seed hides and the deployer's
recipe: one small model per cause in tests/models/, each with the verdicts the plainest script gives (its
EXPECTED) and the findings it must get (EXPECTED_FINDINGS: stage, kind, the line, and whether a rewrite
comes with it). They run in this process (check(..., isolate=False)): each costs its stages' work only."""

import importlib.util
import sys
from pathlib import Path

import pytest

from compatcheck import check
from tests.conftest import ROOT, run_json, verdicts
from tests.shared_runs import literal

# The models without EXPECTED are read by the tests of their own feature (test_device, test_precision).
CAUSES = sorted(path for path in (ROOT / "tests" / "models").glob("*.py") if literal(path, "EXPECTED") is not None)


def load(path: Path):
    spec = importlib.util.spec_from_file_location(f"cause_{path.stem}", path)
    module = importlib.util.module_from_spec(spec)
    sys.modules[spec.name] = module  # torch.export and pickling look classes up by module
    spec.loader.exec_module(module)
    return module


def line_of(path: Path, start: str) -> int:
    lines = [n for n, text in enumerate(path.read_text().splitlines(), 1) if text.strip().startswith(start)]
    assert len(lines) == 1, f"{start!r} starts lines {lines} of {path.name}"
    return lines[0]


@pytest.mark.parametrize("path", CAUSES, ids=[p.stem for p in CAUSES])
def test_each_cause_gets_the_plain_scripts_verdicts_and_its_findings(path):
    expected = literal(path, "EXPECTED")
    module = load(path)
    dynamic = module.get_dynamic_shapes() if hasattr(module, "get_dynamic_shapes") else None
    report = check(module.get_model(), module.get_inputs(), dynamic_shapes=dynamic, isolate=False,
                   stages=list(expected), cache=False, compile_backend="aot_eager")
    assert {s.name: s.status.value for s in report.stages} == expected, {
        s.name: (s.status.value, s.reason) for s in report.stages}
    for want in literal(path, "EXPECTED_FINDINGS"):
        line = line_of(path, want["line"])
        found = [f for f in report.findings if (f.stage, f.kind, f.line) == (want["stage"], want["kind"], line)]
        assert found, f"{want} not among {[(f.stage, f.kind, f.line) for f in report.findings]}"
        assert all(f.file == path.name for f in found)
        if "rewrite" in want:
            assert bool(found[0].rewrite) == want["rewrite"], found[0]
    swept = literal(path, "EXPECTED_SWEPT")
    if swept is not None:  # every stage after eager ran the swept sizes (a pass covers them)
        assert report.stages[0].sweep.sizes == swept
        assert report.stages[0].sweep.caps == (literal(path, "EXPECTED_CAPS") or {})
        for stage in report.stages[1:]:
            if stage.status.value == "pass":
                assert [one.label for one in stage.swept] == swept, stage.name


def test_a_mixed_call_with_constants_runs_through_the_workers_and_the_report_lists_the_constants(tmp_path):
    proc, report = run_json(tmp_path, "run", str(ROOT / "tests" / "models" / "constant_arguments.py"),
                            "--stages", "eager,onnx_export,onnxruntime")
    assert verdicts(report) == {"eager": "pass", "onnx_export": "pass", "onnxruntime": "pass"}, proc.stdout
    assert report["model"]["constants"] == {"mode": "'max'", "dim": "2", "keep": "True"}
    assert report["model"]["input_shapes"] == [[[2, 3, 4]], [[5, 3, 4]]]
