"""export: torch.export.export as a deployer calls it (the API's defaults, under no_grad, with the model's
dynamic shapes); the ExportedProgram is saved, loaded back and run on every input set. The saved program
is what aot_inductor compiles. Where the plain call fails, the other mode (strict=True) and another sample
are tried as recipes, and offered only if they pass."""

from __future__ import annotations

import copy
import dataclasses

import torch

from compatcheck.errors import restated
from compatcheck.report.model import Finding
from compatcheck.recipes import Recipe
from compatcheck.stage_call import ARGS, DYNAMIC_SHAPES, KWARGS, MODEL, StageCall, step
from compatcheck.stages.base import Stage, StageContext, bound, reproduced

ARTIFACT = "model.export.pt2"
STRICT = Recipe("strict=True (the other export mode)", keywords=(("strict", True),))
STATIC = Recipe("a static export per input size (dynamic_shapes=None)", static=True,
                before="# one program per input size served, each exported from an input of that size")


class Export(Stage):
    name = "export"
    same_random = True
    static = STATIC

    def __init__(self):
        self.failure: BaseException | None = None
        self.program = None

    def call(self, ctx: StageContext) -> StageCall:
        static = ctx.recipe is not None and ctx.recipe.static
        return StageCall((step("torch.export.export", MODEL, ARGS, KWARGS,
                               dynamic_shapes=None if static else DYNAMIC_SHAPES, **ctx.keywords, result="program"),))

    def build(self, ctx: StageContext):
        if ctx.recipe is not None and ctx.recipe.static:
            return self._per_size(ctx)
        try:
            program = self.run_call(ctx)
        except Exception as exc:
            self.failure = exc
            raise restated(self._restated(ctx, exc), exc)
        ctx.artifacts[self.name] = self._saved(ctx, program, ARTIFACT)
        loaded = self.program.module()

        def run(input_set):
            with torch.no_grad():
                return loaded(*input_set.args, **input_set.kwargs)

        return run

    def _saved(self, ctx: StageContext, program, filename: str) -> str:
        """Save the program and load it back as `self.program`, which is what runs: saving is part of deploying."""
        from compatcheck.diagnose.export import save_failed

        path = ctx.artifact(filename)
        try:
            torch.export.save(program, str(path))
        except Exception as exc:
            raise restated(save_failed(self.name, ctx, program, exc), exc)
        self.program = torch.export.load(str(path))
        return str(path)

    def _per_size(self, ctx: StageContext):
        """The STATIC recipe: a program with no dynamic dims per input size, exported from the first input of
        that size that comes, saved and loaded back."""
        loaded: dict = {}
        call = self.call_ran = self.call(ctx)

        def run(input_set):
            size = tuple((tuple(leaf.shape), leaf.dtype) for leaf in input_set.leaves())
            if size not in loaded:
                program = call.run(**{**bound(ctx), "args": input_set.args, "kwargs": input_set.kwargs or None})
                self._saved(ctx, program, f"model.export.{len(loaded)}.pt2")
                loaded[size] = self.program.module()
            with torch.no_grad():
                return loaded[size](*input_set.args, **input_set.kwargs)

        return run

    def _restated(self, ctx: StageContext, error: BaseException) -> BaseException:
        """torch.export's error, restated with its cause and the user's line; where the error names no
        line, strict mode's error (which often does) is read for the line, as a diagnosis."""
        from compatcheck.diagnose.export import ExportFailed, headline, torch_export_findings

        try:
            findings = torch_export_findings(self.name, ctx, error)
            if not any(f.line for f in findings) and not ctx.keywords.get("strict"):
                try:
                    Export().run_call(_strict(ctx))
                except Exception as strict_error:
                    located = torch_export_findings(self.name, ctx, strict_error)
                    findings = located if any(f.line for f in located) else findings
        except Exception:  # a diagnosis that fails must not hide torch.export's own error
            return error
        return ExportFailed(headline("torch.export", findings), findings)

    def timed_runners(self, runner):
        return {}  # the program runs as Python here; aot_inductor times what gets deployed

    def backend(self, ctx: StageContext) -> str:
        return "torch.export non-strict"

    def note(self, ctx: StageContext) -> str | None:
        from compatcheck.diagnose.device import program_note

        return program_note(self.program, ctx.spec.user) if self.program is not None else None

    def diagnose(self, ctx: StageContext, error: BaseException | None) -> list[Finding]:
        from compatcheck.diagnose.export import stage_findings
        from compatcheck.diagnose.sample import first_if_size_one
        from compatcheck.diagnose.torch_bug import torch_reproduced

        found = first_if_size_one(self.name, ctx, stage_findings(self.name, ctx, error, self.program), self.failure)
        return torch_reproduced(self.name, ctx, found, self.failure)

    def recipes(self, ctx: StageContext, error: BaseException | None) -> list[Recipe]:
        from compatcheck.diagnose.sample import sample_recipes

        return [*sample_recipes(ctx, self.failure), STRICT]

    def reproduce(self, ctx: StageContext) -> str:
        return reproduced(self.call(ctx), f"torch.export.save(program, os.path.join(HERE, {ARTIFACT!r}))\n"
                          f"loaded = torch.export.load(os.path.join(HERE, {ARTIFACT!r})).module()\n"
                          "def run(args, kwargs):\n    with torch.no_grad():\n        return loaded(*args, **kwargs)\n"
                          "return run\n")


def _strict(ctx: StageContext) -> StageContext:
    """`ctx` as the STRICT recipe builds: the same call in the other mode, for the line it names."""
    strict = copy.copy(ctx)
    strict.recipe = STRICT if ctx.recipe is None else dataclasses.replace(
        ctx.recipe, keywords=(*ctx.recipe.keywords, ("strict", True)))
    return strict
