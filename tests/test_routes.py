"""Routes are summarized from the stages' verdicts, whichever worker or cache they came from."""

from compatcheck.report.model import Finding, Report, StageResult, Status
from compatcheck.report.routes import annotate, summarize


def _report(*stages):
    report = Report(tool_version="0", created="now", stages=list(stages))
    report.findings = [f for s in report.stages for f in s.findings]
    return report


def _by_name(report):
    return {r.name: r for r in summarize(report)}


def test_a_route_is_blocked_at_its_first_failing_stage_by_its_first_finding():
    export_fail = StageResult(name="onnx_export", status=Status.FAIL, findings=[Finding(
        stage="onnx_export", kind="unsupported-op", op="aten.erfinv", file="m.py", line=7, message="no ONNX function")])
    routes = _by_name(_report(StageResult(name="eager", status=Status.PASS), export_fail,
                              StageResult(name="onnxruntime", status=Status.SKIP, reason="needs the artifact")))
    onnx = routes["ONNX → onnxruntime → Triton"]
    assert (onnx.status, onnx.stage) == ("blocked", "onnx_export")
    assert onnx.summary == "blocked at onnx_export by unsupported-op on `aten.erfinv` at m.py:7"
    assert routes["torch.compile"].status == "not-checked"


def test_a_route_a_proven_recipe_unblocks_names_the_call_and_an_unproven_one_does_not():
    def export(*recipes):
        return StageResult(name="export", status=Status.FAIL, findings=[
            Finding(stage="export", kind="export-error", file="m.py", line=4, message="Unsupported"), *recipes])

    proven = Finding(stage="export", kind="passes-with", op="strict=True (the other export mode)",
                     message="export passes with strict=True (the other export mode), checked on every input set")
    unproven = Finding(stage="export", kind="passes-with", op="attn_implementation='eager'",
                       message="not checked: needs a change in your factory")
    route = _by_name(_report(StageResult(name="eager", status=Status.PASS), export(proven)))["torch.export → AOTInductor"]
    assert route.summary == ("blocked at export by export-error at m.py:4; works with strict=True (the other export "
                             "mode), checked on every input set")
    route = _by_name(_report(StageResult(name="eager", status=Status.PASS), export(unproven)))["torch.export → AOTInductor"]
    assert route.summary == "blocked at export by export-error at m.py:4"


def test_graph_breaks_only_warn_on_the_compile_route_and_passing_findings_warn():
    fullgraph = StageResult(name="compile_fullgraph", status=Status.FAIL, findings=[Finding(
        stage="compile_fullgraph", kind="graph-break", op="if", library_file="torchvision/ops/boxes.py",
        library_line=103, message="Data-dependent branching")])
    trace = StageResult(name="jit_trace", status=Status.PASS, findings=[Finding(
        stage="jit_trace", kind="frozen-constant", op="Tensor.item", file="m.py", line=3, message="...")])
    routes = _by_name(_report(StageResult(name="compile", status=Status.PASS), fullgraph, trace))
    assert routes["torch.compile"].status == "works-with-warnings"
    assert routes["torch.compile"].summary == ("works with warnings: compile_fullgraph fail: graph-break on `if` at "
                                               "torchvision/ops/boxes.py:103")
    assert routes["TorchScript (trace)"].status == "works-with-warnings"


def test_a_stage_not_run_is_named_and_the_route_still_works_up_to_it():
    routes = _by_name(_report(StageResult(name="onnx_export", status=Status.PASS),
                              StageResult(name="onnxruntime", status=Status.PASS),
                              StageResult(name="triton", status=Status.SKIP, reason="tritonserver not found")))
    onnx = routes["ONNX → onnxruntime → Triton"]
    assert onnx.status == "works"
    assert onnx.summary == "works (up to onnxruntime; not checked: triton (tritonserver not found))"


def test_the_not_scriptable_finding_names_the_routes_that_work_once_even_when_assembled_again():
    script = StageResult(name="jit_script", status=Status.FAIL, findings=[Finding(
        stage="jit_script", kind="library-not-scriptable", message="...", advice="Do not script it.")])
    report = _report(script, StageResult(name="jit_trace", status=Status.PASS),
                     StageResult(name="compile", status=Status.MISMATCH))
    for _ in range(2):  # a resumed report is assembled again
        report.routes = summarize(report)
        annotate(report)
    assert report.findings[0].advice == "Do not script it. The routes that work here: TorchScript (trace)."
