"""Findings for onnxruntime: kernels it lacks, nodes that fail, and the first op that computes
something else, each mapped back to the torch line the ONNX node was exported from."""

from __future__ import annotations

import re

import onnx

from compatcheck.deadline import within
from compatcheck.diagnose.catalog import with_rewrites
from compatcheck.diagnose.divergence import runtime_values
from compatcheck.diagnose.dynamo import budget
from compatcheck.diagnose.errors import error_finding
from compatcheck.diagnose.found import finding_at, plain
from compatcheck.diagnose.onnx_nodes import named_node, node_finding
from compatcheck.diagnose.ort_optimizer import LEVELS, optimizer_check
from compatcheck.errors import one_line
from compatcheck.ladder import BY_NAME
from compatcheck.onnxruntime_session import providers

# A bfloat16 graph on a provider with kernels of other types only: the catalog's float64 advice does not fit.
REDUCED_REWRITE = ("# the provider has no bfloat16 kernel for it: deploy float16 (or float32) to it\n"
                   "model = model.half()  # check it first: compatcheck run model.py --dtype float16")
_MISSING = re.compile(r"Could not find an implementation for (\w+)\((\d+)\) node with name '([^']*)'")
# onnxruntime's load errors for a file newer than it reads (parsed, so no table of releases goes stale).
_IR_VERSION = re.compile(r"Unsupported model IR version: (\d+), max supported IR version: (\d+)")
_OPSET = re.compile(r"Opset (\d+) is under development.*?support for domain (\S+) is till opset (\d+)", re.S)


def _missing_kernels(stage: str, ctx, model: onnx.ModelProto, providers: list[str]) -> list:
    import onnxruntime

    from compatcheck.diagnose.kernels import blockers

    findings, seen = [], set()
    for blocker in blockers(model, providers):
        has = "; ".join(f"{param}: {', '.join(types)}" for param, types in blocker.available.items())
        needs = ", ".join(f"{param}={t}" for param, t in blocker.types.items())
        said = _MISSING.search(blocker.detail)
        expanded = (f"; onnxruntime expands it to {said.group(1)}({said.group(2)}), which has none either"
                    if said and said.group(1) != blocker.node.op_type else "")
        message = (f"onnxruntime {onnxruntime.__version__} has no {' or '.join(providers)} kernel for "
                   f"{blocker.node.op_type}({blocker.since}) with {needs or 'these types'}"
                   f"{f' (kernels exist for {has})' if has else ''}{expanded}")
        finding = node_finding(stage, ctx, blocker.node, "missing-kernel", message)
        if "bfloat16" in blocker.types.values():
            finding.rewrite = REDUCED_REWRITE
        key = (message, finding.file, finding.line)  # nodes of one op and types from one line: one finding
        if key not in seen:
            seen.add(key)
            findings.append(finding)
    return findings


def _failure_findings(stage: str, ctx, error: BaseException, providers: list[str]) -> list:
    path = ctx.artifacts.get(BY_NAME[stage].requires[0])  # the ONNX file the stage ran
    model = onnx.load(path) if path else None
    text = str(error)
    if model is not None and ("NOT_IMPLEMENTED" in text or _MISSING.search(text)):
        findings = _missing_kernels(stage, ctx, model, providers)
        if findings:
            return findings
    node = named_node(model, text) if model is not None else None
    refused = next((part for part in ("invalid model. ", "failed:Type Error: ") if part in text), None)
    if node is not None and refused:
        detail = text.split(refused, 1)[1].strip()
        detail = detail if refused == "invalid model. " else f"Type Error: {detail}"
        # The graph it refuses may hold nodes it has no kernel for either: they block it next.
        return [node_finding(stage, ctx, node, "invalid-graph", f"onnxruntime refuses the exported graph: {detail}"),
                *_missing_kernels(stage, ctx, model, providers)]
    if node is not None:
        return [node_finding(stage, ctx, node, "runtime-error", one_line(error, 400))]
    missing = _MISSING.search(text)
    return [error_finding(stage, ctx, error, "missing-kernel" if missing else "runtime-error",
                          op=missing.group(1) if missing else None)]


def _where_outputs_differ(ctx, session, index: int) -> str:
    """Per differing output of input set `index`: which indices of which dims differ, and whether they
    are exactly where an integer/bool input is 0 (padding under an attention mask)."""
    import numpy as np
    from torch.utils import _pytree as pytree

    from compatcheck.diagnose.positions import describe, differing, masked_by
    from compatcheck.onnxruntime_session import feeds

    feed = feeds(session, ctx.spec.input_sets[index])
    outputs = session.run(None, feed)
    expected = pytree.tree_leaves(ctx.reference[index])
    leaves = ctx.input_results[index].leaves
    notes = []
    for leaf, want, got in zip(leaves, expected, outputs):
        if leaf.ok or leaf.atol is None or list(np.shape(got)) != list(want.shape):
            continue
        bad = differing(want.detach().cpu().numpy(), np.asarray(got), leaf.atol, leaf.rtol)
        if not bad.any():
            continue
        note = f"output '{leaf.output}' differs in {describe(bad)}"
        mask = masked_by(bad, feed)
        if mask is not None:
            name, dims = mask
            note += (f"; every differing value lies where input {name} is 0 (output dims "
                     f"{', '.join(map(str, dims))} run along {name}'s): if {name} marks padding, those positions "
                     "are never read (generation reads only unpadded ones), and this mismatch does not matter there")
        notes.append(note)
    return ("; ".join(notes) + ".") if notes else ""


def _divergence_findings(stage: str, ctx, session, providers: list[str]) -> list:
    from compatcheck.diagnose.replay import first_value_mismatch

    index = first_value_mismatch(ctx)  # an op can only be blamed for values, not for the outputs' structure
    if index is None:
        return []
    finding = _blamed(stage, ctx, index, session, providers)
    try:
        where = _where_outputs_differ(ctx, session, index)
    except Exception:  # where they differ adds to the finding; the mismatch stands without it
        where = ""
    if where:
        finding.message = f"{finding.message.rstrip('.')}. Where: {where}"
    return [finding]


# What onnx.reference's answer to the failing input set agrees with.
EAGER, RUNTIME, NEITHER = "eager", "onnxruntime", "neither"


def _blamed(stage: str, ctx, index: int, session, providers: list[str]):
    """Who makes input set `index` differ, the cheapest check first: onnxruntime's optimizer (a lower level
    answers as eager does), the exporter (the reference evaluator answers as onnxruntime does, not as eager),
    else onnxruntime itself (its first node that differs). Within the diagnosis budget; what was checked
    before it ran out is said."""
    checked, oracle = [], None
    with within(2 * budget(ctx) + 10) as timer:
        said = optimizer_check(ctx, index, providers)
        checked.append(f"the session built again at {', '.join(LEVELS[:-1])}, each run on every input set")
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
    finding.checked_by = "; ".join(checked)
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


def too_new(stage: str, error: BaseException):
    """The finding for an ONNX file whose IR version or opset is newer than this onnxruntime reads, from its
    load error; None for any other error."""
    import onnxruntime

    runtime, text = f"onnxruntime {onnxruntime.__version__}", str(error)
    ir = _IR_VERSION.search(text)
    if ir:
        return plain(stage, "onnx-version",
                     f"the ONNX file's IR version {ir[1]} is newer than {runtime} reads (IR version {ir[2]} at most): "
                     "the onnx package that wrote it is newer than this onnxruntime; the opset is not the cause",
                     op=f"IR version {ir[1]}",
                     rewrite=f"pip install --upgrade onnxruntime  # or an onnx release that writes IR version {ir[2]}")
    opset = _OPSET.search(text)
    if opset:
        return plain(stage, "onnx-version",
                     f"the ONNX file's opset {opset[1]} (domain {opset[2]}) is newer than {runtime} runs (opset "
                     f"{opset[3]} at most); the IR version is not the cause", op=f"opset {opset[1]}",
                     rewrite=f"torch.onnx.export(..., opset_version={opset[3]})  # compatcheck: --onnx-opset {opset[3]}")
    return None


def _optimizer_first(stage: str, ctx, findings: list, providers: list[str]) -> list:
    """A failing session: where a lower optimization level loads and answers every input set as eager does,
    the optimizer's finding comes first, before the failure's own."""
    from compatcheck.diagnose.replay import first_mismatch

    with within(2 * budget(ctx) + 10):
        said = optimizer_check(ctx, first_mismatch(ctx) or 0, providers)
        if said.avoids:
            checked = [f"the session built again at {', '.join(LEVELS[:-1])}, each run on every input set"]
            return [_optimizer_finding(stage, first_mismatch(ctx) or 0, said, providers, checked), *findings]
    return findings


@with_rewrites
def runtime_findings(stage: str, ctx, error: BaseException | None, session) -> list:
    if error is not None:
        found = too_new(stage, error)
        if found is not None:
            return [found]
        asked = providers(ctx.options.device)
        return _optimizer_first(stage, ctx, _failure_findings(stage, ctx, error, asked), asked)
    if session is None:
        return []
    return _divergence_findings(stage, ctx, session, session.get_providers())
