"""Findings for a model whose outputs change by design (random draws, the clock): the artifact kept
varying as eager does, or the draw or the time was frozen into it."""

from __future__ import annotations

from compatcheck.diagnose.found import finding_at
from compatcheck.report.model import Finding


def _varies(ctx) -> str:
    """'aten.bernoulli_ at model.py:12': what makes eager's outputs change, and where."""
    site = ctx.varies.first()
    return site.what + (f" at {ctx.spec.user.display(site.frame.filename)}:{site.frame.lineno}" if site.frame else "")


def lost(ctx) -> str:
    if ctx.varies.random:
        return (f"the randomness was lost: eager's outputs change with the seed ({_varies(ctx)}), these do not: one "
                "draw was frozen in when the artifact was built")
    return (f"the reading of the clock was lost: eager's outputs change with the time ({_varies(ctx)}), these do "
            "not: the time the artifact was built at is frozen in")


def variation_finding(stage: str, ctx, passed: bool) -> Finding:
    """For a model random by design or reading the clock: its outputs were not compared value by value;
    the artifact kept varying (a note), or it did not (the randomness was lost when it was built)."""
    site = ctx.varies.first()
    if passed:
        return finding_at(ctx.spec.user,
            stage, "nondeterministic", f"values not compared: {what_varies(ctx)}; the artifact's outputs change with "
            f"the {'seed' if ctx.varies.random else 'time'} as eager's do, and their types and shapes match",
            location=site.frame, op=site.what)
    return finding_at(ctx.spec.user, stage, "variation-lost", lost(ctx), location=site.frame, op=site.what)


def what_varies(ctx) -> str:
    return f"{'random' if ctx.varies.random else 'reads the clock'} ({_varies(ctx)})"
