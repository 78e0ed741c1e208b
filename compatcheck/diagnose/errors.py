"""The generic finding for a stage that raised: the error, located in the user's code."""

from __future__ import annotations

from compatcheck.errors import one_line
from compatcheck.report.model import Finding
from compatcheck.diagnose.found import finding_at


class Diagnosed(RuntimeError):
    """A tool's error restated: its first line is the cause and the user's line, not the step it
    failed in; it carries the findings, which the restating needed anyway."""

    def __init__(self, message: str, findings: list):
        super().__init__(message)
        self.findings = findings


def locate(ctx, error: BaseException):
    """The user's file:line for an error: from the printed user stack torch puts in the message
    (dynamo, TorchScript, torch.export), else from the Python traceback."""
    return ctx.spec.user.from_stack_text(str(error)) or ctx.spec.user.from_exception(error)


def error_stack(ctx, error: BaseException):
    """The stack an error happened in: the one printed in its message, else its traceback's."""
    text = str(error)
    return text if ctx.spec.user.printed_locations(text) else ctx.spec.user.exception_stack(error)


def error_finding(stage: str, ctx, error: BaseException, kind: str, *, op: str | None = None,
                  rewrite: str | None = None) -> Finding:
    return finding_at(ctx.spec.user, stage, kind, one_line(error, 400), location=locate(ctx, error), op=op,
                                 rewrite=rewrite, stack=error_stack(ctx, error))


def artifact_error(stage: str, ctx, error: BaseException, where: str) -> Finding:
    """The finding for an artifact that built and then raised on `where` (an input set, a swept size) that
    eager answers, where the stage's own diagnosis found nothing more to say."""
    guard = (" The program guards a size computed from the sample's: the dims declared dynamic are not free "
             "there.") if str(error).startswith("Guard failed") else ""
    return error_finding(stage, ctx, error, "artifact-error").model_copy(update={
        "message": f"the {stage} artifact raised on {where}, which eager answers: {one_line(error, 400)}{guard}",
        "checked_by": f"the artifact ran on {where} and raised; eager answered it"})
