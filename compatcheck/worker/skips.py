"""Why a stage cannot run here, before it starts: eager did not pass, an artifact it needs is missing,
this torch lacks a feature it uses, or an optional package is not installed."""

from __future__ import annotations

from compatcheck import torch_features
from compatcheck.errors import UsageError, one_line
from compatcheck.ladder import BY_NAME, REFERENCE, missing_artifact
from compatcheck.report.model import Status
from compatcheck.stages.base import Stage, StageContext
from compatcheck.worker.runs import MODEL_ERRORS


def skip_reason(stage: Stage, ctx: StageContext) -> str | None:
    if stage.name != REFERENCE:
        # eager may run in another lane's worker; its verdict, if known, decides, else its outputs do.
        eager = ctx.previous.get(REFERENCE)
        if eager is not None and eager != Status.PASS.value:
            return f"eager did not pass ({eager}): nothing to compare with"
        try:
            ctx.reference
        except UsageError:
            raise
        except MODEL_ERRORS as exc:
            return f"eager raised {one_line(exc)}: nothing to compare with"
    for needed in BY_NAME[stage.name].requires:
        if needed not in ctx.artifacts:
            return missing_artifact(needed, ctx.previous.get(needed), ctx.blockers.get(needed))
    for feature in stage.needs(ctx):
        reason = torch_features.missing(feature)
        if reason:
            return reason
    return stage.available(ctx)
