"""Findings for onnxruntime: kernels it lacks and nodes that fail, mapped back to torch."""

from __future__ import annotations

from compatcheck.diagnose.errors import error_finding


def runtime_findings(stage: str, ctx, error: BaseException | None) -> list:
    if error is None:
        return []
    return [error_finding(stage, ctx, error, "runtime-error")]
