"""Who is to blame when onnxruntime does not answer as eager does, the cheapest check first: its graph
optimizer (a lower optimization level answers every input set as eager does: ort_optimizer.py), the
exporter (ONNX's reference evaluator answers as onnxruntime does, not as eager: onnx_reference.py),
or onnxruntime itself (the reference answers as eager does); each with the first node that differs
(divergence.py). Within the diagnosis budget, saying what was checked."""

from __future__ import annotations

import onnx

from compatcheck.deadline import within
from compatcheck.diagnose.divergence import runtime_values
from compatcheck.diagnose.dynamo import budget
from compatcheck.diagnose.found import finding_at, plain
from compatcheck.diagnose.ort_optimizer import LEVELS, optimizer_check
from compatcheck.errors import one_line


# What onnx.reference's answer to the failing input set agrees with.
EAGER, RUNTIME, NEITHER = "eager", "onnxruntime", "neither"
LEVELS_RUN = f"the session built again at {', '.join(LEVELS[:-1])}, each run on every input set"


def blamed(stage: str, ctx, index: int, session, providers: list[str]):
    """Who makes input set `index` differ, the cheapest check first: onnxruntime's optimizer (a lower level
    answers as eager does), the exporter (the reference evaluator answers as onnxruntime does, not as eager),
    else onnxruntime itself (its first node that differs). Within the diagnosis budget; what was checked
    before it ran out is said."""
    checked, oracle = [], None
    with within(2 * budget(ctx) + 10) as timer:
        said = optimizer_check(ctx, index, providers)
        checked.append(LEVELS_RUN)
        if said.avoids:
            return _optimizer_finding(stage, index, said, providers, checked)
        if _eager_far(ctx, index):
            return _unjudged(stage, ctx, index, checked)
        oracle = _reference_says(ctx, index, session)
        checked.append(f"input set {index + 1} run in onnx.reference" if oracle in (EAGER, RUNTIME, NEITHER) else
                       f"onnx.reference not run: {oracle}")
        if oracle == RUNTIME:
            return _exporter_finding(stage, ctx, index, checked)
        finding = _first_divergent_op(stage, ctx, index, runtime_values(providers), "onnxruntime computes it with")
    if timer.expired:
        finding = finding_at(ctx.spec.user, stage, "numeric-divergence",
                             f"input set {index + 1} differs from eager; who is to blame was not settled: "
                             "--diagnose-budget ran out")
    elif oracle in (EAGER, NEITHER):
        finding.message = f"{_ORACLE_SAID[oracle].format(set=index + 1)} {_sentence(finding.message)}"
    finding.checked_by = "; ".join(checked) or None
    return finding


_ORACLE_SAID = {
    EAGER: ("onnxruntime computes the graph otherwise than ONNX's reference evaluator (onnx.reference), which "
            "answers input set {set} as eager does, at every optimization level: onnxruntime's kernels are the "
            "cause, not the exporter."),
    NEITHER: ("eager, onnxruntime and ONNX's reference evaluator (onnx.reference) each answer input set {set} "
              "otherwise: on this evidence neither onnxruntime nor the exporter is to blame alone."),
}


def _eager_far(ctx, index: int) -> bool:
    """Whether input set `index` differs only where eager itself is far from its float64 run."""
    off = [leaf for leaf in ctx.input_results[index].leaves if not leaf.ok]
    return bool(off) and all((leaf.fp64_verdict or "").startswith("eager itself is") for leaf in off)


def _unjudged(stage: str, ctx, index: int, checked: list[str]):
    finding = finding_at(ctx.spec.user, stage, "numeric-divergence",
                         f"input set {index + 1} differs from eager only where eager itself is far from its float64 "
                         "run (values on a rounding edge, as quantized outputs have, or a sum that cancels): no "
                         "backend can be judged there, so neither onnxruntime, its optimizer nor the exporter is "
                         "blamed")
    finding.checked_by = "; ".join(checked)
    return finding


def _reference_says(ctx, index: int, session) -> str:
    """What onnx.reference's answer to input set `index` agrees with (EAGER, RUNTIME or NEITHER), or why it
    was not run."""
    import torch

    from compatcheck.compare import compare_outputs
    from compatcheck.diagnose.onnx_reference import Unfit, reference_outputs
    from compatcheck.diagnose.replay import as_eager
    from compatcheck.onnxruntime_session import feeds

    input_set = ctx.spec.input_sets[index]
    try:
        answer = reference_outputs(onnx.load(ctx.artifacts["onnx_export"]), input_set)
    except Unfit as exc:
        return str(exc)
    if as_eager(ctx, index, answer):
        return EAGER
    runtime = [torch.from_numpy(one) for one in session.run(None, feeds(session, input_set))]
    leaves, _ = compare_outputs(runtime, answer, ctx.tolerances, flat=True)
    return RUNTIME if leaves and all(leaf.ok for leaf in leaves) else NEITHER


def _optimizer_finding(stage: str, index: int, said, providers: list[str], checked: list[str]):
    fused = f", where it makes {', '.join(said.fused)}" if said.fused else ""
    message = (f"onnxruntime's graph optimizer makes the difference, not the model's ops: at {said.avoids} every "
               f"input set answers as eager does; {said.brings} brings the difference on input set {index + 1}"
               f"{fused}. Below {said.brings}, the session leaves those rewrites out.")
    rewrite = ("import onnxruntime\noptions = onnxruntime.SessionOptions()\n"
               f"options.graph_optimization_level = onnxruntime.GraphOptimizationLevel.{said.avoids}\n"
               f"session = onnxruntime.InferenceSession('model.onnx', options, providers={providers!r})")
    return plain(stage, "runtime-optimizer", message, op=said.brings, rewrite=rewrite,
                 checked_by="; ".join(checked + said.tried))


def _exporter_finding(stage: str, ctx, index: int, checked: list[str]):
    from compatcheck.diagnose.onnx_reference import reference_values

    finding = _first_divergent_op(stage, ctx, index, reference_values, "the exporter translated it into")
    finding.kind, finding.checked_by = "export-divergence", "; ".join(checked)
    head = (f"the exported graph means something else than eager computed: ONNX's reference evaluator "
            f"(onnx.reference) differs from eager on input set {index + 1} as onnxruntime does, so the export is "
            "the cause, not onnxruntime.")
    if finding.op is None and ctx.previous.get("onnx_export") in ("mismatch", "fail"):
        finding.message = (f"{head} The exported program the graph was translated from differs from eager there "
                           "too: torch.export's capture is the cause, not the ONNX translation (onnx_export's finding)")
    else:
        finding.message = f"{head} {_sentence(finding.message)}"
    return finding


def _sentence(text: str) -> str:
    return text[:1].upper() + text[1:]


def _first_divergent_op(stage: str, ctx, index: int, values_of, made: str):
    """The first op whose value, as `values_of` computes the graph, differs from the exported program's."""
    from compatcheck.diagnose.divergence import first_divergence

    if ctx.options.onnx_exporter != "dynamo":
        return finding_at(ctx.spec.user, stage, "numeric-divergence",
                          f"input set {index + 1} differs from eager; finding the first divergent op needs the "
                          "dynamo exporter")
    try:
        found = first_divergence(ctx, index, values_of)
    except Exception as exc:  # the search exports and runs again; the mismatch stands without it
        return finding_at(ctx.spec.user, stage, "numeric-divergence",
                          f"input set {index + 1} differs from eager; the search for the first divergent op "
                          f"failed: {one_line(exc)}")
    if found is None:
        return finding_at(ctx.spec.user, stage, "numeric-divergence",
                          f"input set {index + 1} differs from eager, but no intermediate value does once each is "
                          "compared with the exported program's")
    node = found.fx_node
    op = str(node.target).removesuffix(".default")
    error = f"max abs error {found.max_abs_error:.3g}" if found.max_abs_error is not None else found.problem
    message = (f"first divergent op on input set {index + 1}: {op} ({error}); every value before it matches. "
               f"{_sentence(made)} {', '.join(found.onnx_ops)}")
    return finding_at(ctx.spec.user, stage, "numeric-divergence", message, op=op,
                      stack=node.meta.get("stack_trace") or "")


def optimizer_first(stage: str, ctx, findings: list, providers: list[str]) -> list:
    """A failing session: where a lower optimization level loads and answers every input set as eager does,
    the optimizer's finding comes first, before the failure's own."""
    from compatcheck.diagnose.replay import first_mismatch

    first = first_mismatch(ctx) or 0
    with within(2 * budget(ctx) + 10):
        said = optimizer_check(ctx, first, providers)
        if said.avoids:
            return [_optimizer_finding(stage, first, said, providers, [LEVELS_RUN]), *findings]
    return findings
