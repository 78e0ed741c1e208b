"""Findings for onnxruntime: kernels it lacks, nodes that fail, a file newer than it reads, and where
its answer differs from eager's, with who is to blame for it (onnx_blame.py), each mapped back to the
torch line the ONNX node was exported from."""

from __future__ import annotations

import re

import onnx

from compatcheck.diagnose.catalog import with_rewrites
from compatcheck.diagnose.errors import error_finding
from compatcheck.diagnose.found import plain
from compatcheck.diagnose.onnx_blame import blamed, optimizer_first
from compatcheck.diagnose.onnx_nodes import named_node, node_finding
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
    finding = blamed(stage, ctx, index, session, providers)
    try:
        where = _where_outputs_differ(ctx, session, index)
    except Exception:  # where they differ adds to the finding; the mismatch stands without it
        where = ""
    if where:
        finding.message = f"{finding.message.rstrip('.')}. Where: {where}"
    return [finding]


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


@with_rewrites
def runtime_findings(stage: str, ctx, error: BaseException | None, session) -> list:
    if error is not None:
        found = too_new(stage, error)
        if found is not None:
            return [found]
        asked = providers(ctx.options.device)
        return optimizer_first(stage, ctx, _failure_findings(stage, ctx, error, asked), asked)
    if session is None:
        return []
    return _divergence_findings(stage, ctx, session, session.get_providers())
