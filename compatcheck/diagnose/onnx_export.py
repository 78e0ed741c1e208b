"""Findings for torch.onnx.export: torch.export errors and ops with no ONNX translation."""

from __future__ import annotations

from compatcheck.diagnose.errors import error_finding


def export_findings(stage: str, ctx, error: BaseException | None, program) -> list:
    if error is None:
        return []
    return [error_finding(stage, ctx, error, "export-error")]
