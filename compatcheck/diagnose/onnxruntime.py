"""Findings for onnxruntime: kernels it lacks, nodes that fail, and the first op that computes
something else, each mapped back to the torch line the ONNX node was exported from."""

from __future__ import annotations

import re

import onnx

from compatcheck.diagnose.catalog import with_rewrites
from compatcheck.diagnose.errors import error_finding
from compatcheck.diagnose.onnx_nodes import named_node, node_finding
from compatcheck.errors import one_line
from compatcheck.ladder import BY_NAME
from compatcheck.onnxruntime_session import providers
from compatcheck.diagnose.found import finding_at

# A bfloat16 graph on a provider with kernels of other types only: the catalog's float64 advice does not fit.
REDUCED_REWRITE = ("# the provider has no bfloat16 kernel for it: deploy float16 (or float32) to it\n"
                   "model = model.half()  # check it first: compatcheck run model.py --dtype float16")
_MISSING = re.compile(r"Could not find an implementation for (\w+)\((\d+)\) node with name '([^']*)'")


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
    finding = _first_divergent_op(stage, ctx, index, providers)
    try:
        where = _where_outputs_differ(ctx, session, index)
    except Exception:  # where they differ adds to the finding; the mismatch stands without it
        where = ""
    if where:
        finding.message = f"{finding.message.rstrip('.')}. Where: {where}"
    return [finding]


def _first_divergent_op(stage: str, ctx, index: int, providers: list[str]):
    from compatcheck.diagnose.divergence import first_divergence

    if ctx.options.onnx_exporter != "dynamo":
        return finding_at(ctx.spec.user,
            stage, "numeric-divergence",
            f"input set {index + 1} differs from eager; finding the first divergent op needs the dynamo exporter",
        )
    try:
        found = first_divergence(ctx, index, providers)
    except Exception as exc:  # the search exports and runs again; the mismatch stands without it
        return finding_at(ctx.spec.user,
            stage, "numeric-divergence",
            f"input set {index + 1} differs from eager; the search for the first divergent op failed: {one_line(exc)}",
        )
    if found is None:
        finding = finding_at(ctx.spec.user, stage, "numeric-divergence",
                             f"input set {index + 1} differs from eager, but no intermediate value does once each is "
                             f"a graph output; {_optimizer_said(ctx, index, providers)}")
        finding.checked_by = "the session ran again with graph_optimization_level ORT_DISABLE_ALL"
        return finding
    node = found.fx_node
    op = str(node.target).removesuffix(".default")
    error = f"max abs error {found.max_abs_error:.3g}" if found.max_abs_error is not None else found.problem
    message = (f"first divergent op on input set {index + 1}: {op} ({error}); every value before it matches. "
               f"onnxruntime computes it with {', '.join(found.onnx_ops)}")
    return finding_at(ctx.spec.user, stage, "numeric-divergence", message, op=op, stack=node.meta.get("stack_trace") or "")


def _optimizer_said(ctx, index: int, providers: list[str]) -> str:
    """Whether onnxruntime's graph optimizer makes the difference, checked: input set `index` run again in a
    session with every optimization off, compared with eager as the stage compares."""
    import onnxruntime

    from compatcheck.compare import compare_outputs
    from compatcheck.onnxruntime_session import feeds, session_options

    options = session_options(graph_optimization_level=onnxruntime.GraphOptimizationLevel.ORT_DISABLE_ALL)
    try:
        session = onnxruntime.InferenceSession(ctx.artifacts["onnx_export"], options, providers=providers)
        outputs = session.run(None, feeds(session, ctx.spec.input_sets[index]))
        leaves, _ = compare_outputs(ctx.reference[index], outputs, ctx.tolerances, flat=True,
                                    fp64=lambda: ctx.fp64(index))
    except Exception as exc:  # the finding stands without the check; it says the check did not run
        return f"whether onnxruntime's optimizer is the cause was not checked ({one_line(exc)})"
    if leaves and all(leaf.ok for leaf in leaves):
        return ("with graph_optimization_level ORT_DISABLE_ALL it matches eager: onnxruntime's graph optimizer "
                "makes the difference (SessionOptions.graph_optimization_level avoids it)")
    return ("with graph_optimization_level ORT_DISABLE_ALL it differs too, so onnxruntime's graph optimizer is not "
            "the cause: look at the exported graph")


@with_rewrites
def runtime_findings(stage: str, ctx, error: BaseException | None, session) -> list:
    if error is not None:
        return _failure_findings(stage, ctx, error, providers(ctx.options.device))
    if session is None:
        return []
    return _divergence_findings(stage, ctx, session, session.get_providers())
