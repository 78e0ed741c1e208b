"""Findings for TorchScript: the script frontend's errors and the tracer's warnings."""

from __future__ import annotations

from compatcheck.diagnose.errors import error_finding


def script_findings(stage: str, ctx, error: BaseException | None) -> list:
    if error is None:
        return []
    return [error_finding(stage, ctx, error, "unsupported-python")]


def _tracer_kind(message: str) -> str:
    if "Python boolean" in message:
        return "frozen-control-flow"
    return "frozen-constant"


def trace_findings(stage: str, ctx, error: BaseException | None) -> list:
    import torch

    findings = []
    seen = set()
    for warning, stack in ctx.warnings:
        if not issubclass(warning.category, torch.jit.TracerWarning):
            continue
        frame = ctx.spec.user.innermost(stack)
        message = str(warning.message).strip()
        key = (frame.filename if frame else None, frame.lineno if frame else None, message)
        if key in seen:
            continue
        seen.add(key)
        findings.append(ctx.spec.user.finding(stage, _tracer_kind(message), message, location=frame))
    if error is not None:
        findings.append(error_finding(stage, ctx, error, "trace-error"))
    return findings
