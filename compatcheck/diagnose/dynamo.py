"""Findings for torch.compile: every graph break that blocks fullgraph, at the user's line.

fullgraph=True stops at the first break; torch._dynamo.explain walks past it and lists them all.
"""

from __future__ import annotations

import re

from compatcheck.diagnose.catalog import with_rewrites
from compatcheck.diagnose.constructs import construct
from compatcheck.diagnose.errors import error_finding

_TENSOR_METHOD = re.compile(r"\bTensor\.(\w+)\(")
_LOWERING_TARGET = re.compile(r"target: (\w+\.\w+(?:\.\w+)?)")


def _describe(reason: str) -> str:
    first = reason.strip().splitlines()[0] if reason.strip() else "graph break"
    if first.startswith("generic_jump"):  # explain's name for a branch on a tensor
        return "Data-dependent branching: a Python branch on a tensor's value"
    return first.removeprefix("Unsupported ").strip()


def _op(code: str | None, reason: str) -> str | None:
    found = construct(code)
    if found in ("if", "while"):
        return found
    method = _TENSOR_METHOD.search(reason)
    return f"Tensor.{method.group(1)}" if method else found


def _breaks(ctx) -> list[tuple[str, list]]:
    """(reason, user stack) per graph break, explained with the scalar and dynamic-shape capture that
    fullgraph=True turns on, so breaks fullgraph does not have are not listed."""
    import torch

    first = ctx.spec.input_sets[0]
    torch._dynamo.reset()
    try:
        with torch._dynamo.config.patch(capture_scalar_outputs=True, capture_dynamic_output_shape_ops=True), \
                torch.no_grad():
            explained = torch._dynamo.explain(ctx.spec.model)(*first.args, **first.kwargs)
    finally:
        torch._dynamo.reset()
    return [(reason.reason, reason.user_stack) for reason in explained.break_reasons]


def _headline(error: BaseException) -> str:
    """The raised break in one line: its type and the first line of dynamo's explanation."""
    from compatcheck.versions import graph_break_type

    text = str(error)
    explanation = text.split("Explanation:", 1)[1].strip().splitlines()[0] if "Explanation:" in text else ""
    gb_type = graph_break_type(error)
    return f"{gb_type}: {explanation}".strip(": ") if gb_type else _describe(text)


def _graph_breaks(stage: str, ctx, error: BaseException) -> list:
    user = ctx.spec.user
    try:
        breaks = _breaks(ctx)
    except Exception:  # explain retraces the model; when it cannot, the raised break still stands
        breaks = []
    by_line: dict[tuple, tuple] = {}  # (file, line) -> (frame, message, reason), in break order
    for reason, stack in breaks:
        frame = user.innermost(stack)
        if frame is not None:
            by_line.setdefault((frame.filename, frame.lineno), (frame, _describe(reason), reason))
    raised = user.innermost(getattr(error, "real_stack", None) or [])
    if raised is not None:  # its message is better than explain's (which can be as terse as 'generic_jump')
        by_line[(raised.filename, raised.lineno)] = (raised, _headline(error), str(error))
    findings = []
    for frame, message, reason in by_line.values():
        finding = user.finding(stage, "graph-break", message, location=frame)
        finding.op = _op(finding.code, reason)
        findings.append(finding)
    return findings or [error_finding(stage, ctx, error, "graph-break")]


@with_rewrites
def graph_break_findings(stage: str, ctx, error: BaseException | None) -> list:
    if error is None:
        return []
    import torch

    if stage == "compile_fullgraph" and isinstance(error, torch._dynamo.exc.Unsupported):
        return _graph_breaks(stage, ctx, error)
    target = _LOWERING_TARGET.search(str(error))
    return [error_finding(stage, ctx, error, "compile-error", op=target.group(1) if target else None)]
