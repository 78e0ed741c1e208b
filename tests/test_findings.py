"""Findings name the op that blocks a stage and the user's line, for every example model with a
stage that does not pass; from the suite's one run of each model (tests/shared_runs.py)."""

import pytest

from compatcheck.diagnose.catalog import load as load_catalog
from compatcheck.report.model import Finding
from compatcheck.diagnose.loops import carried_names
from tests.conftest import MODELS
from tests.shared_runs import literal

PASSING = {"pass", "skip"}


def line_of(path, text):
    """The line holding `text`, so these tables survive edits above it."""
    lines = [n for n, line in enumerate(path.read_text().splitlines(), 1) if text in line]
    assert len(lines) == 1, f"{text!r} is on lines {lines} of {path.name}"
    return lines[0]


# Models that predate EXPECTED_FINDINGS: (stage, kind, op, text on the line the finding must point at).
OLDER_MODELS = {
    "data_dependent_if": [
        ("compile_fullgraph", "graph-break", "if", "if x.sum() > 0:"),
        ("jit_trace", "frozen-control-flow", "if", "if x.sum() > 0:"),
        ("export", "data-dependent-guard", "if", "if x.sum() > 0:"),
        ("onnx_export", "data-dependent-guard", "if", "if x.sum() > 0:"),
        ("openvino", "frozen-control-flow", "if", "if x.sum() > 0:"),
    ],
    "numpy_forward": [
        ("jit_script", "unsupported-python", "numpy.sqrt", "scale = np.sqrt("),
        ("jit_script", "unsupported-python", "numpy.asarray", "np.asarray(scale"),
        ("jit_trace", "frozen-constant", "Tensor.numpy", "scale = np.sqrt("),
        ("jit_trace", "frozen-constant", "torch.from_numpy", "np.asarray(scale"),
        ("export", "export-error", None, "scale = np.sqrt("),
    ],
    "dict_outputs": [("jit_trace", "container-output", "dict", 'return {"logits"')],
    "item_call": [("jit_trace", "frozen-constant", "Tensor.item", "peak = x.abs().max().item()")],
}


def expected_findings(stem):
    """(stage, kind, op, line) the model must produce."""
    path = MODELS / f"{stem}.py"
    if stem in OLDER_MODELS:
        return [(stage, kind, op, line_of(path, text)) for stage, kind, op, text in OLDER_MODELS[stem]]
    return [(f["stage"], f["kind"], f["op"], f["line"]) for f in literal(path, "EXPECTED_FINDINGS") or []]


def blocked_models():
    return sorted(p.stem for p in MODELS.glob("*.py")
                  if set((literal(p, "EXPECTED") or {}).values()) - PASSING)


MODELS_WITH_FINDINGS = sorted(set(OLDER_MODELS) | {p.stem for p in MODELS.glob("*.py")
                                                   if literal(p, "EXPECTED_FINDINGS")})


def test_every_blocked_example_model_has_expected_findings_for_each_blocked_stage():
    assert blocked_models()
    for stem in blocked_models():
        verdicts = literal(MODELS / f"{stem}.py", "EXPECTED")
        blocked = {stage for stage, verdict in verdicts.items() if verdict not in PASSING}
        covered = {stage for stage, *_ in expected_findings(stem)}
        assert blocked <= covered, f"{stem}: no expected finding for {sorted(blocked - covered)}"


@pytest.fixture(params=MODELS_WITH_FINDINGS)
def run(request, shared_runs):
    """(model stem, report) from the suite's one run of the model (tests/shared_runs.py)."""
    stem = request.param
    report = shared_runs.get(MODELS / f"{stem}.py").report
    missing = {stage for stage, *_ in expected_findings(stem)} - {stage["name"] for stage in report["stages"]}
    assert not missing, f"{stem}: findings expected from stages its EXPECTED table does not name: {missing}"
    return stem, report


@pytest.mark.slow
def test_findings_name_the_op_and_the_line(run):
    stem, report = run
    found = {(f["stage"], f["kind"], f["op"], f["line"]) for f in report["findings"]}
    for expected in expected_findings(stem):
        assert expected in found, f"{stem}: {expected} not among {sorted(found, key=str)}"
    for finding in report["findings"]:
        if (finding["stage"], finding["kind"], finding["op"], finding["line"]) in set(expected_findings(stem)) and \
                finding["line"] is not None:  # a finding of no line (a runtime's setting) points at no file
            assert finding["file"] == f"{stem}.py"
            source = (MODELS / f"{stem}.py").read_text().splitlines()[finding["line"] - 1].strip()
            assert finding["code"] == source


@pytest.mark.slow
def test_every_stage_that_does_not_pass_has_a_finding(run):
    stem, report = run
    for stage in report["stages"]:
        if stage["status"] not in PASSING:
            assert stage["findings"], f"{stem}: {stage['name']} {stage['status']} without a finding"


@pytest.mark.slow
def test_expected_findings_carry_the_catalog_rewrite(run):
    stem, report = run
    catalog = load_catalog(None)
    expected = set(expected_findings(stem))
    for data in report["findings"]:
        # The catalog is keyed by op: an error no op is named in (export-error) has no entry to carry.
        if (data["stage"], data["kind"], data["op"], data["line"]) in expected and data["op"] is not None:
            finding = Finding(**{**data, "rewrite": None})
            entry = catalog.match(finding)
            assert entry is not None, f"{stem}: no catalog entry for {data['op']} in {data['stage']}"
            assert data["rewrite"] == entry.text(finding)


@pytest.mark.slow
def test_onnx_export_reason_states_the_cause_not_the_step(run):
    stem, report = run
    stage = next((s for s in report["stages"] if s["name"] == "onnx_export"), None)
    if stage is None or stage["status"] != "fail":
        # Not a failing export here: it must not be one the model's table expects to fail.
        assert (literal(MODELS / f"{stem}.py", "EXPECTED") or {}).get("onnx_export") != "fail"
        return
    assert "step 1/3" not in stage["reason"] and "step 3/3" not in stage["reason"]
    ops = {f["op"] for f in stage["findings"]}
    first = stage["findings"][0]
    if first["kind"] in ("data-dependent-guard", "dynamic-shape"):  # the cause is a line, not an op
        assert f"{first['file']}:{first['line']}" in stage["reason"]
        assert "data-dependent" in stage["reason"] or "is dynamic" in stage["reason"]
    else:
        names = {op.split(".")[1] if "." in op else op for op in ops}  # aten.erfinv -> erfinv; MatMul
        assert any(name in stage["reason"] for name in names), stage["reason"]


def test_the_untranslatable_ops_come_from_the_program_the_failed_export_decomposed():
    """Listing every op without an ONNX function reads the program the plain call had decomposed, from the
    error's traceback, instead of exporting the model a second time."""
    import torch

    from compatcheck.diagnose.onnx_export import _exporter_error, _translated, _untranslatable
    from compatcheck.spec import load

    spec = load(MODELS / "op_erfinv.py", "get_model")
    with pytest.raises(Exception) as raised:
        torch.onnx.export(spec.model, spec.input_sets[0].args, dynamo=True, verbose=False)
    found = _translated(_exporter_error(raised.value))
    assert found is not None, "the exporter's frame no longer holds its decomposed program"
    assert [str(node.meta["original_aten"]) for node in _untranslatable(*found)] == ["aten.erfinv.default"]


@pytest.mark.slow
@pytest.mark.parametrize("stem, carried", [("carried_loop", True), ("loop_over_batch", False)])
def test_a_loop_whose_steps_carry_state_is_offered_no_batching_rewrite(shared_runs, stem, carried):
    report = shared_runs.get(MODELS / f"{stem}.py").report
    loops = [f for f in report["findings"] if f["op"] in ("for", "for-carried")]
    assert loops and all((f["op"] == "for-carried") is carried for f in loops)
    for finding in loops:
        assert ("vmap" in finding["rewrite"]) is not carried and ("static" in finding["rewrite"]) is carried
        assert ("Each step reads what the step before wrote (acc)" in finding["message"]) is carried


def test_carried_names_tell_a_dependent_step_from_an_independent_one(tmp_path):
    source = tmp_path / "loops.py"
    source.write_text("def f(h, x, decay, T, out):\n"
                      "    for t in range(T):\n        acc = decay * acc + h[:, t]\n"
                      "    for t in range(T):\n        y = x[t] * 2\n        outs.append(y)\n"
                      "    for t in range(T):\n        h, c = cell(x[:, t], (h, c))\n"
                      "    for t in range(T):\n        out[:, t] = x[:, t].mean()\n"
                      "    for t in range(T):\n        total += x[t]\n")
    found = {line: carried_names(str(source), line) for line in (2, 4, 7, 9, 11)}
    assert found == {2: ["acc"], 4: [], 7: ["c", "h"], 9: [], 11: ["total"]}
