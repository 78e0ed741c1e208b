"""Findings of the serving stage: what the dynamic batcher needs that the served model lacks, answers
that changed when the server batched requests together, and a server that failed or did not load the
model. They point at the server's config and requests, not at a line of code."""

from __future__ import annotations

from compatcheck.diagnose.found import plain
from compatcheck.report.model import Finding


def batcher_misfits(stage: str, messages: list[str]) -> list[Finding]:
    return [plain(stage, "batcher-misfit", message, op="config.pbtxt") for message in messages]


def changed_under_load(stage: str, problem: str) -> Finding:
    return plain(stage, "batch-dependence", problem)


def not_loaded(stage: str, model: str, reason: str) -> Finding:
    return plain(stage, "triton-load-failure", f"the server did not load model {model!r}: {reason}")


def server_failed(stage: str, error: BaseException) -> Finding:
    return plain(stage, "triton-server-error", str(error))
