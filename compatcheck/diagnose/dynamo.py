"""Findings for torch.compile: graph breaks and compile errors, at the user's line."""

from __future__ import annotations

from compatcheck.diagnose.errors import error_finding


def graph_break_findings(stage: str, ctx, error: BaseException | None) -> list:
    if error is None:
        return []
    return [error_finding(stage, ctx, error, "graph-break" if stage == "compile_fullgraph" else "compile-error")]
