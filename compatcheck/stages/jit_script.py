"""jit_script: torch.jit.script, saved and loaded back, so the file users ship is what runs."""

from __future__ import annotations

import torch

from compatcheck.report.model import Finding
from compatcheck.stages.base import Stage, StageContext


def run_loaded(module):
    def run(input_set):
        with torch.no_grad():
            return module(*input_set.args, **input_set.kwargs)

    return run


class JitScript(Stage):
    name = "jit_script"

    def build(self, ctx: StageContext):
        scripted = torch.jit.script(ctx.spec.model)
        path = ctx.artifact("model.script.pt")
        torch.jit.save(scripted, str(path))
        ctx.artifacts[self.name] = str(path)
        return run_loaded(torch.jit.load(str(path)))

    def diagnose(self, ctx: StageContext, error: BaseException | None) -> list[Finding]:
        from compatcheck.diagnose.torchscript import script_findings

        return script_findings(self.name, ctx, error)

    def reproduce(self, ctx: StageContext) -> str:
        return (
            "scripted = torch.jit.script(model)\ntorch.jit.save(scripted, 'model.script.pt')\n"
            "loaded = torch.jit.load('model.script.pt')\n"
            "with torch.no_grad():\n    for args, kwargs in input_sets:\n        print(loaded(*args, **kwargs))\n"
        )
