"""export: torch.export.export with the model's dynamic shapes, non-strict first, then strict (as
the ONNX exporter falls back); the ExportedProgram is saved, loaded back and run on every input set.
The saved program is what aot_inductor compiles and what onnx_export translates."""

from __future__ import annotations

import torch

from compatcheck.report.model import Finding
from compatcheck.stages.base import Stage, StageContext

ARTIFACT = "model.export.pt2"


def export(ctx: StageContext, strict: bool) -> torch.export.ExportedProgram:
    first = ctx.spec.input_sets[0]
    return torch.export.export(ctx.spec.model, first.args, first.kwargs or None,
                               dynamic_shapes=ctx.spec.dynamic_shapes, strict=strict)


class Export(Stage):
    name = "export"

    def __init__(self):
        self.mode: str | None = None  # the mode that worked
        self.failures: dict[str, BaseException] = {}
        self.program = None

    def build(self, ctx: StageContext):
        program = None
        for mode, strict in (("non-strict", False), ("strict", True)):
            try:
                program = export(ctx, strict)
                self.mode = mode
                break
            except Exception as exc:
                self.failures[mode] = exc
        if program is None:
            raise self._restated(ctx)
        path = ctx.artifact(ARTIFACT)
        torch.export.save(program, str(path))
        ctx.artifacts[self.name] = str(path)
        self.program = torch.export.load(str(path))
        loaded = self.program.module()

        def run(input_set):
            with torch.no_grad():
                return loaded(*input_set.args, **input_set.kwargs)

        return run

    def _restated(self, ctx: StageContext) -> BaseException:
        """Both modes failed: the non-strict error, restated with its cause and the user's line (the
        strict error where only it locates the cause)."""
        from compatcheck.diagnose.export import ExportFailed, headline, torch_export_findings

        error = self.failures["non-strict"]
        try:
            findings = torch_export_findings(self.name, ctx, error)
            if not any(f.line for f in findings):
                located = torch_export_findings(self.name, ctx, self.failures["strict"])
                findings = located if any(f.line for f in located) else findings
        except Exception:  # a diagnosis that fails must not hide torch.export's own error
            return error
        restated = ExportFailed(headline("torch.export (non-strict and strict)", findings), findings)
        restated.__cause__ = error
        return restated

    def timed_runners(self, runner):
        return {}  # the program runs as Python here; aot_inductor times what gets deployed

    def backend(self, ctx: StageContext) -> str:
        if self.mode == "strict":
            return f"torch.export strict (non-strict failed: {_one_line(self.failures['non-strict'])})"
        return f"torch.export {self.mode}" if self.mode else "torch.export: non-strict and strict failed"

    def diagnose(self, ctx: StageContext, error: BaseException | None) -> list[Finding]:
        from compatcheck.diagnose.export import stage_findings

        return stage_findings(self.name, ctx, error, self.program)

    def reproduce(self, ctx: StageContext) -> str:
        return (
            "args, kwargs = input_sets[0]\n"
            "try:  # non-strict first, then strict, as the stage does\n"
            "    program = torch.export.export(model, args, kwargs or None, dynamic_shapes=dynamic_shapes)\n"
            "except Exception:\n"
            "    program = torch.export.export(model, args, kwargs or None, dynamic_shapes=dynamic_shapes,\n"
            "                                  strict=True)\n"
            f"torch.export.save(program, os.path.join(HERE, {ARTIFACT!r}))\n"
            f"loaded = torch.export.load(os.path.join(HERE, {ARTIFACT!r})).module()\n"
            "def run(args, kwargs):\n    with torch.no_grad():\n        return loaded(*args, **kwargs)\n"
            "return run\n"
        )


def _one_line(error: BaseException) -> str:
    from compatcheck.errors import one_line

    return one_line(error, 160)
