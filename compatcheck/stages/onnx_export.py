"""onnx_export: torch.onnx.export (dynamo by default, or the legacy TorchScript exporter), then
onnx.checker with full_check. With the dynamo exporter, the exported program is run on every
input set: it is what the ONNX graph was translated from."""

from __future__ import annotations

import torch

from compatcheck.report.model import Finding
from compatcheck.spec import dynamic_dims
from compatcheck.stages.base import Stage, StageContext
from compatcheck.versions import DYNAMO_EXPORTER, LEGACY_EXPORTER


class OnnxExport(Stage):
    name = "onnx_export"

    def __init__(self):
        self.program = None
        self.reused = False

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
                self.program = torch.onnx.export(
                    exported if self.reused else ctx.spec.model, first.args, kwargs=first.kwargs or None,
                    dynamic_shapes=ctx.spec.dynamic_shapes, dynamo=True, opset_version=opset, verbose=False,
                )
            except Exception as exc:  # the exporter's first line names the step that failed, not the cause
                from compatcheck.diagnose.onnx_export import restate

                cause = restate(self.name, ctx, exc)
                if cause is None:
                    raise
                raise cause from exc
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

    def timed_runners(self, runner):
        return {}  # the exported program is a checking aid, not something to deploy

    def backend(self, ctx: StageContext) -> str:
        reused = ", from the export stage's program" if self.reused else ""
        return f"{ctx.options.onnx_exporter} exporter{reused}"

    def diagnose(self, ctx: StageContext, error: BaseException | None) -> list[Finding]:
        from compatcheck.diagnose.onnx_export import export_findings

        return export_findings(self.name, ctx, error, self.program and self.program.exported_program)

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
