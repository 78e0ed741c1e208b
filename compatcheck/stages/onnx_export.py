"""onnx_export: torch.onnx.export as a deployer calls it (dynamo by default, or the legacy TorchScript
exporter; the API's defaults, under no_grad, on the model itself), then onnx.checker with full_check. With
the dynamo exporter, the exported program is run on every input set: it is what the ONNX graph was
translated from. Where the plain call fails, the exporter's other settings (the inferred dims as
Dim.AUTO, optimize=False, the other exporter, another sample) are tried as recipes, and offered only
if they pass."""

from __future__ import annotations

import torch

from compatcheck.errors import chain, chain_text, restated
from compatcheck.report.model import Finding
from compatcheck.spec import dynamic_dims
from compatcheck.recipes import Recipe
from compatcheck.stage_call import ARGS, DYNAMIC_SHAPES, KWARGS, MODEL, PATH, Name, Shaped, StageCall, step
from compatcheck.stages.base import Stage, StageContext, reproduced
from compatcheck.torch_features import DYNAMO_EXPORTER, LEGACY_EXPORTER

AUTO = Recipe("the inferred dims as Dim.AUTO (a dim may come out static; every input set is checked)",
              auto_dims=True)
NOT_OPTIMIZED = Recipe("optimize=False (the exporter's graph optimizer left out)", keywords=(("optimize", False),))
LEGACY = Recipe("dynamo=False (the TorchScript-based exporter)", keywords=(("dynamo", False),))
DYNAMO = Recipe("dynamo=True (the torch.export-based exporter)", keywords=(("dynamo", True),))
# torch.onnx.export captures the model its own way (size-oblivious, say); a program from torch.export's
# own defaults may pass where that capture fails.
PROGRAM = Recipe("the program of torch.export.export (its defaults), handed to torch.onnx.export", from_program=True)


def _legacy_axes(ctx: StageContext) -> tuple[list[str], dict | None]:
    names = [f"input{i}" for i in range(len(ctx.sample.leaves()))]
    axes = {name: {d: f"{name}_dim{d}" for d in dims} for name, dims in zip(names, dynamic_dims(ctx.spec)) if dims}
    return names, axes or None


class OnnxExport(Stage):
    name = "onnx_export"
    proven_by = "onnxruntime"  # a recipe is offered only when the ONNX file it makes runs right there

    def __init__(self):
        self.program = None
        self.failure: BaseException | None = None

    def needs(self, ctx: StageContext):
        return (DYNAMO_EXPORTER if ctx.options.onnx_exporter == "dynamo" else LEGACY_EXPORTER,)

    def _dynamo(self, ctx: StageContext) -> bool:
        return ctx.keywords.get("dynamo", ctx.options.onnx_exporter == "dynamo")

    def call(self, ctx: StageContext) -> StageCall:
        recipe, dynamo = ctx.recipe, self._dynamo(ctx)
        keywords = {name: value for name, value in ctx.keywords.items() if name != "dynamo"}
        keywords["dynamo"] = ctx.keywords["dynamo"] if "dynamo" in ctx.keywords else Shaped(dynamo, "onnx_exporter")
        keywords["opset_version"] = Shaped(ctx.options.onnx_opset, "onnx_opset")
        if not dynamo:
            names, axes = _legacy_axes(ctx)
            return StageCall((step("torch.onnx.export", MODEL, ARGS, PATH, kwargs=KWARGS, input_names=names,
                                   dynamic_axes=axes, **keywords),), "path: where the ONNX file is written")
        steps, target, dims, comment = [], MODEL, DYNAMIC_SHAPES, None
        if recipe and recipe.auto_dims:
            dims, comment = Name("auto_dynamic_shapes"), "auto_dynamic_shapes: dynamic_shapes, each Dim.DYNAMIC as Dim.AUTO"
        if recipe and recipe.from_program:
            steps.append(step("torch.export.export", MODEL, ARGS, KWARGS, dynamic_shapes=dims, result="program"))
            target = Name("program")
        steps.append(step("torch.onnx.export", target, ARGS, kwargs=KWARGS, dynamic_shapes=dims, verbose=False,
                          **keywords, result="onnx_program"))
        return StageCall(tuple(steps), comment)

    def build(self, ctx: StageContext):
        import onnx

        path = ctx.artifact("model.onnx")
        files = {"path": str(path)}
        if ctx.recipe and ctx.recipe.auto_dims:
            from compatcheck.diagnose.dynamic_dims import as_auto

            files["auto_dynamic_shapes"] = as_auto(ctx.spec.dynamic_shapes)
        if self._dynamo(ctx):
            try:
                self.program = self.run_call(ctx, **files)
            except Exception as exc:
                self.failure = exc
                raise restated(self._restated(ctx, exc), exc)
            self.program.save(str(path))
        else:
            self.run_call(ctx, **files)
        ctx.artifacts[self.name] = str(path)
        onnx.checker.check_model(str(path), full_check=True)
        if self.program is None:
            return None
        exported = self.program.exported_program.module()

        def run(input_set):
            with torch.no_grad():
                return exported(*input_set.args, **input_set.kwargs)

        return run

    def _restated(self, ctx: StageContext, error: BaseException) -> BaseException:
        """The exporter's first line names the step, not the cause: restated with the cause and the line."""
        from compatcheck.diagnose.onnx_export import restate

        return restate(self.name, ctx, error) or error

    def timed_runners(self, runner):
        return {}  # the exported program is a checking aid, not something to deploy

    def backend(self, ctx: StageContext) -> str:
        return f"{'dynamo' if self._dynamo(ctx) else 'legacy'} exporter"

    def diagnose(self, ctx: StageContext, error: BaseException | None) -> list[Finding]:
        from compatcheck.diagnose.onnx_export import export_findings
        from compatcheck.diagnose.sample import first_if_size_one

        findings = export_findings(self.name, ctx, error, self.program and self.program.exported_program)
        return first_if_size_one(self.name, ctx, findings, self.failure or error)

    def recipes(self, ctx: StageContext, error: BaseException | None) -> list[Recipe]:
        from compatcheck.diagnose.dynamic_dims import is_specialization
        from compatcheck.diagnose.sample import sample_recipes

        if not self._dynamo(ctx):
            return sample_recipes(ctx, error) + other_exporter(ctx)
        if self.failure is None:
            return sample_recipes(ctx, error)
        found = sample_recipes(ctx, self.failure)
        # The optimizer runs after capture and translation succeeded: leaving it out is the first thing to try.
        if "optimiz" in chain_text(self.failure).lower() or _raised_in(self.failure, "optimizer"):
            found.append(NOT_OPTIMIZED)
        if ctx.spec.dynamic_shapes_inferred and not is_specialization(self.failure):
            found.append(AUTO)
        if ctx.previous.get("export") != "fail":  # that capture failed already in this run
            found.append(PROGRAM)
        return found + other_exporter(ctx)

    def reproduce(self, ctx: StageContext) -> str:
        check = "import onnx\nonnx.checker.check_model(path, full_check=True)\n"
        if not self._dynamo(ctx):
            return reproduced(self.call(ctx), check + "return None  # the legacy exporter leaves nothing to run but "
                              "the ONNX file: onnxruntime runs it\n", path="model.onnx")
        return reproduced(self.call(ctx), "onnx_program.save(path)\n" + check +
                          "exported = onnx_program.exported_program.module()\n"
                          "def run(args, kwargs):\n    with torch.no_grad():\n        return exported(*args, **kwargs)\n"
                          "return run\n", path="model.onnx")


def other_exporter(ctx: StageContext) -> list[Recipe]:
    """The exporter the plain call does not use, as a recipe, where this torch release has it."""
    from compatcheck.torch_features import missing

    if ctx.options.onnx_exporter == "dynamo":
        return [LEGACY] if missing(LEGACY_EXPORTER) is None else []
    return [DYNAMO] if missing(DYNAMO_EXPORTER) is None else []


def _raised_in(error: BaseException, part: str) -> bool:
    """Whether the error or one it chains was raised from a file whose path has `part` in it."""
    import traceback

    return any(part in frame.filename for one in chain(error) for frame in traceback.extract_tb(one.__traceback__))
