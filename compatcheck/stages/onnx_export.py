"""onnx_export: torch.onnx.export (dynamo by default, or the legacy TorchScript exporter), then
onnx.checker with full_check. With the dynamo exporter, the exported program is run on every
input set: it is what the ONNX graph was translated from."""

from __future__ import annotations

import torch

from compatcheck.report.model import Finding
from compatcheck.spec import dynamic_dims
from compatcheck.stages.base import Stage, StageContext
from compatcheck.torch_features import DYNAMO_EXPORTER, LEGACY_EXPORTER


class OnnxExport(Stage):
    name = "onnx_export"

    def __init__(self):
        self.program = None
        self.reused = False
        self.retried: tuple | None = None  # (the Dim.DYNAMIC error, specializations) when Dim.AUTO exported it
        self.auto_failed: str | None = None  # what the Dim.AUTO export raised when it failed too

    def _exported(self, ctx: StageContext):
        """The export stage's program when it passed in this run: the same torch.export capture the
        exporter would make, already checked on every input set, so it is not traced a second time."""
        path = ctx.artifacts.get("export")
        if ctx.previous.get("export") != "pass" or path is None:
            return None
        return torch.export.load(path)

    def needs(self, ctx: StageContext):
        return (DYNAMO_EXPORTER if ctx.options.onnx_exporter == "dynamo" else LEGACY_EXPORTER,)

    def build(self, ctx: StageContext):
        import onnx

        first = ctx.spec.input_sets[0]
        path = ctx.artifact("model.onnx")
        opset = ctx.options.onnx_opset
        if ctx.options.onnx_exporter == "dynamo":
            exported = self._exported(ctx)
            self.reused = exported is not None
            try:
                self.program = self._export(ctx, exported if self.reused else ctx.spec.model,
                                            ctx.spec.dynamic_shapes)
            except Exception as exc:
                self.program = self._export_auto(ctx, exc)
            self.program.save(str(path))
        else:
            names = [f"input{i}" for i in range(len(first.leaves()))]
            axes = {name: {d: f"{name}_dim{d}" for d in dims}
                    for name, dims in zip(names, dynamic_dims(ctx.spec)) if dims}
            with torch.no_grad():
                torch.onnx.export(
                    ctx.spec.model, first.args, str(path), kwargs=first.kwargs or None, dynamo=False,
                    input_names=names, dynamic_axes=axes or None, opset_version=opset,
                )
        ctx.artifacts[self.name] = str(path)
        onnx.checker.check_model(str(path), full_check=True)
        if self.program is None:
            return None
        exported = self.program.exported_program.module()

        def run(input_set):
            with torch.no_grad():
                return exported(*input_set.args, **input_set.kwargs)

        return run

    @staticmethod
    def _export(ctx: StageContext, model, dynamic_shapes):
        first = ctx.spec.input_sets[0]
        return torch.onnx.export(
            model, first.args, kwargs=first.kwargs or None, dynamic_shapes=dynamic_shapes,
            dynamo=True, opset_version=ctx.options.onnx_opset, verbose=False,
        )

    def _export_auto(self, ctx: StageContext, error: BaseException):
        """Export again with the inferred dims as Dim.AUTO when Dim.DYNAMIC failed for a reason other than
        a specialization; otherwise (or if that fails too) raise the first error, restated with its cause."""
        from compatcheck.diagnose.dynamic_dims import as_auto, is_specialization, recording_specializations
        from compatcheck.diagnose.onnx_export import restate

        if ctx.spec.dynamic_shapes_inferred and not is_specialization(error):
            try:
                with recording_specializations() as events:
                    program = self._export(ctx, ctx.spec.model, as_auto(ctx.spec.dynamic_shapes))
                self.retried = (error, events)
                return program
            except Exception as again:  # the verdict is about the first recipe: its error is the one to report
                from compatcheck.errors import one_line

                self.auto_failed = one_line(again, 200)
        cause = restate(self.name, ctx, error)  # the exporter's first line names the step, not the cause
        if cause is None:
            raise error
        raise cause from error

    def timed_runners(self, runner):
        return {}  # the exported program is a checking aid, not something to deploy

    def backend(self, ctx: StageContext) -> str:
        reused = ", from the export stage's program" if self.reused else ""
        return f"{ctx.options.onnx_exporter} exporter{reused}"

    def diagnose(self, ctx: StageContext, error: BaseException | None) -> list[Finding]:
        from compatcheck.diagnose.dynamic_dims import retried_findings
        from compatcheck.diagnose.onnx_export import export_findings
        from compatcheck.diagnose.sample import first_if_size_one

        findings = export_findings(self.name, ctx, error, self.program and self.program.exported_program)
        if self.auto_failed and findings:  # not one spelling of the dims tripping the exporter: both do
            findings[0].message = (findings[0].message.rstrip(". ") + ". Exported again with the inferred dims as "
                                   f"Dim.AUTO, it fails too: {self.auto_failed}")
        if self.retried is not None and self.program is not None:
            first_error, events = self.retried
            findings += retried_findings(self.name, ctx, self.program.exported_program, first_error, events,
                                         dynamic_dims(ctx.spec))
        return first_if_size_one(self.name, ctx, findings, error)

    def reproduce(self, ctx: StageContext) -> str:
        if ctx.options.onnx_exporter == "legacy":
            names = [f"input{i}" for i in range(len(ctx.spec.input_sets[0].leaves()))]
            axes = {name: {d: f"{name}_dim{d}" for d in dims}
                    for name, dims in zip(names, dynamic_dims(ctx.spec)) if dims}
            return (
                "args, kwargs = input_sets[0]\n"
                "with torch.no_grad():\n"
                "    torch.onnx.export(model, args, os.path.join(HERE, 'model.onnx'), kwargs=kwargs or None,\n"
                f"                      dynamo=False, input_names={names!r}, dynamic_axes={axes or None!r},\n"
                f"                      opset_version={ctx.options.onnx_opset})\n"
                "import onnx\nonnx.checker.check_model(os.path.join(HERE, 'model.onnx'), full_check=True)\n"
                "return None  # the legacy exporter leaves nothing to run but the ONNX file: onnxruntime runs it\n"
            )
        return (
            "args, kwargs = input_sets[0]\n"
            "program = torch.onnx.export(model, args, kwargs=kwargs or None, dynamo=True, verbose=False,\n"
            f"                            dynamic_shapes=dynamic_shapes, opset_version={ctx.options.onnx_opset})\n"
            "program.save(os.path.join(HERE, 'model.onnx'))\n"
            "import onnx\nonnx.checker.check_model(os.path.join(HERE, 'model.onnx'), full_check=True)\n"
            "exported = program.exported_program.module()\n"
            "def run(args, kwargs):\n    with torch.no_grad():\n        return exported(*args, **kwargs)\n"
            "return run\n"
        )
