"""Findings for torch.compile: every graph break that blocks fullgraph, at the user's line.

fullgraph=True stops at the first break, whose error names the cause: that finding comes at once.
Compiling again with graph breaks allowed walks past it and lists the others; on a big model that
hunt can take many times the stage itself, so it runs within a time budget (--diagnose-budget,
default the stage's own time plus 10 s) and the finding says when the list was cut short.
"""

from __future__ import annotations

import re
import time

from compatcheck.deadline import within
from compatcheck.diagnose.catalog import with_rewrites
from compatcheck.diagnose.constructs import construct
from compatcheck.diagnose.errors import error_finding, error_stack
from compatcheck.diagnose.found import finding_at

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


DEFAULT_EXTRA_SECONDS = 10.0


def recompile_reason(error: BaseException) -> str | None:
    """Dynamo's reason, in one line, where `error` is its refusal to compile again under the stance
    'fail_on_recompile' (the first guard that fails, and 0/1 specialization where that is why); None for
    any other error."""
    text = str(error)
    if "fail_on_recompile" not in text and "Detected recompile" not in text:
        return None
    failures = [line.strip()[2:] for line in text.splitlines() if line.strip().startswith("- ")]
    if not failures:
        return "a guard of every compiled graph fails"
    first = failures[0]
    guard = (first.split(":", 1)[1] if ":" in first else first).split("  #", 1)[0].strip()
    return f"guard {guard} fails" + (": 0/1 specialization" if "0/1 specialization" in first else "")


def budget(ctx) -> float:
    """Seconds the search for further graph breaks may take."""
    given = ctx.options.diagnose_budget
    return given if given is not None else ctx.stage_seconds + DEFAULT_EXTRA_SECONDS


def _breaks(ctx, seconds: float) -> tuple[list[tuple[str, list]], bool]:
    """(reason, stack) per graph break found within `seconds`, and whether the search was cut short.

    Compiled with the scalar and dynamic-shape capture that fullgraph=True turns on, so breaks
    fullgraph does not have are not listed; breaks are recorded as each graph compiles, so what was
    found before the deadline is kept."""
    import torch
    from torch._dynamo.backends.debugging import ExplainWithBackend

    first = ctx.spec.input_sets[0]
    explainer = ExplainWithBackend("eager")
    torch._dynamo.reset()
    try:
        with torch._dynamo.config.patch(capture_scalar_outputs=True, capture_dynamic_output_shape_ops=True), \
                torch.no_grad(), within(seconds) as timer:
            torch.compile(ctx.spec.model, backend=explainer)(*first.args, **first.kwargs)
    finally:
        torch._dynamo.reset()
    return [(reason.reason, reason.user_stack) for reason in explainer.break_reasons], timer.expired


def _headline(error: BaseException) -> str:
    """The raised break in one line: its type and the first line of dynamo's explanation."""
    from compatcheck.torch_features import graph_break_type

    text = str(error)
    explanation = text.split("Explanation:", 1)[1].strip().splitlines()[0] if "Explanation:" in text else ""
    gb_type = graph_break_type(error)
    return f"{gb_type}: {explanation}".strip(": ") if gb_type else _describe(text)


def _break_finding(stage: str, ctx, message: str, reason: str, stack):
    finding = finding_at(ctx.spec.user, stage, "graph-break", message, stack=stack)
    finding.op = _op(finding.library_code or finding.code, reason)
    return finding


def _key(finding) -> tuple:
    return finding.file, finding.line, finding.library_file, finding.library_line


_GUARD = re.compile(r"Could not guard on data-dependent expression (.+?) \(unhinted")


def _raised(stage: str, ctx, error: BaseException):
    """The break fullgraph raised, from the error itself: the stack dynamo kept, else the user stack it
    printed (a data-dependent guard's 'Caused by' frame is its innermost one)."""
    real_stack = getattr(error, "real_stack", None)
    guard = _GUARD.search(str(error))
    if guard:
        message = f"the code branches on a value computed from the input (data-dependent guard {guard.group(1)})"
        finding = finding_at(ctx.spec.user, stage, "data-dependent-guard", message, stack=str(error))
        finding.op = _op(finding.library_code or finding.code, str(error))
        return finding
    return _break_finding(stage, ctx, _headline(error), str(error), real_stack or error_stack(ctx, error))


def _graph_breaks(stage: str, ctx, error: BaseException) -> list:
    # The raised break first, from the error itself: its message is better than the search's (which can
    # be as terse as 'generic_jump'), and it needs no second compile.
    raised = _raised(stage, ctx, error)
    findings = [raised] if raised.file or raised.library_file else []
    seconds = budget(ctx)
    started = time.perf_counter()
    try:
        breaks, cut_short = _breaks(ctx, seconds)
    except Exception:  # the search compiles the model again; when it cannot, the raised break still stands
        breaks, cut_short = [], False
    seen = {_key(f) for f in findings}
    for reason, stack in breaks:
        finding = _break_finding(stage, ctx, _describe(reason), reason, stack)
        if (finding.file or finding.library_file) and _key(finding) not in seen:
            seen.add(_key(finding))
            findings.append(finding)
    findings = findings or [error_finding(stage, ctx, error, "graph-break")]
    if cut_short:
        findings[0].message = findings[0].message.rstrip(". ") + (f". The search for further graph breaks was cut short after "
                                f"{time.perf_counter() - started:.1f}s (--diagnose-budget {seconds:g}): "
                                f"this list of {len(findings)} may be incomplete.")
    return findings


@with_rewrites
def graph_break_findings(stage: str, ctx, error: BaseException | None, fullgraph: bool) -> list:
    """A graph break (which fullgraph=True turns into an error) with every further one the search finds;
    any other compile error at the user's line."""
    if error is None:
        return []
    import torch

    if fullgraph and isinstance(error, (torch._dynamo.exc.Unsupported, torch._dynamo.exc.UserError)):
        return _graph_breaks(stage, ctx, error)
    target = _LOWERING_TARGET.search(str(error))
    return [error_finding(stage, ctx, error, "compile-error", op=target.group(1) if target else None)]
