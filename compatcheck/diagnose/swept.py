"""Findings for an artifact that breaks at a swept size (sweep.py) though it passed every input set:
the lines that pin a dynamic dimension, or decide on its size, or read it."""

from __future__ import annotations

from compatcheck.report.model import Finding, InputSetResult
from compatcheck.report.verdict import problem
from compatcheck.diagnose.found import finding_at


def swept_findings(stage: str, ctx, broken: InputSetResult) -> list[Finding]:
    """Where an artifact breaks at a swept size: the lines that pin a dynamic dimension, found by tracing
    the model (draft_export's guards), else the size itself."""
    from compatcheck.diagnose import shapes

    pinned = shapes.pinned_by_code(ctx)
    found = shapes.findings(stage, ctx, pinned) if pinned else []
    if found:  # none where the artifact served every other size of each: then the lines below say more
        for finding in found:
            finding.message += f"; it shows at {broken.label}, which the input sets lack"
        return found
    for one in shapes.specializations(ctx, dict.fromkeys(broken.dims)):
        at = ctx.spec.user.innermost(one.stack)
        if one.guard and at is not None:
            return [finding_at(ctx.spec.user,
                stage, "dynamic-shape", f"{one.dim} is dynamic, but the code decides on its size ({one.guard}): "
                f"at {broken.label}, which the input sets lack, the artifact takes the path of the sample's size",
                location=at, stack=one.stack, op=broken.label)]
    used = shapes.size_used_at(ctx, broken.dims)
    if used is not None:
        finding = finding_at(ctx.spec.user,
            stage, "dynamic-shape", f"{used[2]} is dynamic, and this line of forward reads it: at {broken.label}, "
            "which the input sets lack, the artifact does not do what eager does, as if the size had been fixed "
            "when it was built", location=used[:2], op=broken.label)
        finding.rewrite = shapes.shape_branch(finding.code, used[2])
        return [finding]
    return [Finding(stage=stage, kind="dynamic-shape", op=broken.label,
                    message=f"the artifact {'fails' if broken.error else 'differs from eager'} at {broken.label}, "
                            f"which the input sets lack, though eager runs there ({problem(broken)}); no line of "
                            f"yours decides on that size: add an input set of that size to reproduce it")]


