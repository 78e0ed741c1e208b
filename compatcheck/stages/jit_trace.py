"""jit_trace: torch.jit.trace on input set 1 under no_grad, with the API's defaults (the trace checked
against a second run, check_trace=True), saved and loaded back.

Tracing records one path through the code; running the other input sets is what shows a frozen
branch or shape. TracerWarnings are kept for the diagnosis.
"""

from __future__ import annotations

import torch

from compatcheck.report.model import Finding
from compatcheck.recipes import Recipe
from compatcheck.stage_call import ARGS, MODEL, Name, StageCall, step
from compatcheck.stages.base import Stage, StageContext, reproduced
from compatcheck.torch_features import TORCHSCRIPT_TRACE
from compatcheck.stages.jit_script import run_loaded


# The trace as it is, not checked against a second run: where that check fails (a graph that differs
# across runs), the trace may still compute the right thing on every input set.
UNCHECKED = Recipe("check_trace=False (the trace not checked against a second run)", keywords=(("check_trace", False),))


class JitTrace(Stage):
    name = "jit_trace"
    same_random = True

    def __init__(self):
        self.traced = None

    def needs(self, ctx: StageContext):
        return (TORCHSCRIPT_TRACE,)

    def call(self, ctx: StageContext) -> StageCall:
        if ctx.sample.kwargs:  # a mixed call is traced as keywords: jit.trace takes one or the other
            return StageCall((step("torch.jit.trace", MODEL, example_kwarg_inputs=Name("keywords"), **ctx.keywords,
                                   result="traced"),), "keywords: the sample's arguments, all as keywords")
        return StageCall((step("torch.jit.trace", MODEL, ARGS, **ctx.keywords, result="traced"),))

    def build(self, ctx: StageContext):
        with torch.no_grad():
            traced = self.run_call(ctx)
        self.traced = traced
        path = ctx.artifact("model.trace.pt")
        torch.jit.save(traced, str(path))
        ctx.artifacts[self.name] = str(path)
        return run_loaded(torch.jit.load(str(path)))

    def note(self, ctx: StageContext) -> str | None:
        from compatcheck.diagnose.device import trace_note

        return trace_note(self.traced, ctx.spec.user) if self.traced is not None else None

    def diagnose(self, ctx: StageContext, error: BaseException | None) -> list[Finding]:
        from compatcheck.diagnose.sample import first_if_size_one
        from compatcheck.diagnose.torchscript import trace_findings

        return first_if_size_one(self.name, ctx, trace_findings(self.name, ctx, error))

    def recipes(self, ctx: StageContext, error: BaseException | None) -> list[Recipe]:
        from compatcheck.diagnose.sample import sample_recipes

        found = sample_recipes(ctx, error)
        # Where forward keeps state, the check is right: a trace without it answers like the first call forever.
        if error is not None and type(error).__name__ == "TracingCheckError" and not ctx.kept:
            found.append(UNCHECKED)
        return found

    def reproduce(self, ctx: StageContext) -> str:
        return reproduced(self.call(ctx), "torch.jit.save(traced, os.path.join(HERE, 'model.trace.pt'))\n"
                          "loaded = torch.jit.load(os.path.join(HERE, 'model.trace.pt'))\n"
                          "def run(args, kwargs):\n    with torch.no_grad():\n        return loaded(*args, **kwargs)\n"
                          "return run\n")
