"""eager: the model as written. It is the reference; run twice to tell nondeterminism from backend error,
and sample by sample against batches of the user's samples, to tell whether answers depend on the batch."""

from __future__ import annotations

import torch

from compatcheck.compare import flatten
from compatcheck.diagnose.batching import batch_dependence
from compatcheck.diagnose.eager import eager_findings
from compatcheck.report.model import Finding
from compatcheck.stages.base import Stage, StageContext


class Eager(Stage):
    name = "eager"

    def __init__(self):
        self.unstable: str | None = None  # where eager itself is far from float64
        self.batching: list[Finding] = []

    def build(self, ctx: StageContext):
        ctx.reference  # noqa: B018 - computing it is the point: it raises what the model raises
        ctx.tolerances.check([name for name, _ in flatten(ctx.reference[0])[0]])  # a key no output has: the user's
        self.batching = batch_dependence(ctx, self.name)
        return ctx.eager

    def backend(self, ctx: StageContext) -> str:
        return f"torch {torch.__version__}"

    def note(self, ctx: StageContext) -> str | None:
        return self.unstable

    def diagnose(self, ctx: StageContext, error: BaseException | None) -> list[Finding]:
        findings, self.unstable = eager_findings(ctx, self.name, error, self.batching)
        return findings

    def reproduce(self, ctx: StageContext) -> str:
        return (
            "def run(args, kwargs):\n    with torch.no_grad():\n        return model(*args, **kwargs)\n"
            "return run\n"
        )
