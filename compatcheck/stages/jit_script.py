"""jit_script: torch.jit.script, saved and loaded back, so the file users ship is what runs."""

from __future__ import annotations

import torch

from compatcheck.report.model import Finding
from compatcheck.stage_call import MODEL, StageCall, step
from compatcheck.stages.base import Stage, StageContext, reproduced
from compatcheck.torch_features import TORCHSCRIPT_SCRIPT


def run_loaded(module):
    def run(input_set):
        with torch.no_grad():
            return module(*input_set.args, **input_set.kwargs)

    return run


class JitScript(Stage):
    name = "jit_script"
    same_random = True

    def needs(self, ctx: StageContext):
        return (TORCHSCRIPT_SCRIPT,)

    def __init__(self):
        self.scripted = None  # as scripted, not loaded back: its nodes keep the user's lines

    def build(self, ctx: StageContext):
        scripted = self.scripted = self.run_call(ctx)
        path = ctx.artifact("model.script.pt")
        torch.jit.save(scripted, str(path))
        ctx.artifacts[self.name] = str(path)
        return run_loaded(torch.jit.load(str(path)))

    def intermediates(self, ctx: StageContext, input_set):
        from compatcheck.diagnose.script_sizes import artifact_shapes

        return artifact_shapes(self.scripted, ctx.spec.user, input_set) if self.scripted is not None else None

    def diagnose(self, ctx: StageContext, error: BaseException | None) -> list[Finding]:
        from compatcheck.diagnose.torchscript import script_findings

        return script_findings(self.name, ctx, error)

    def call(self, ctx: StageContext) -> StageCall:
        return StageCall((step("torch.jit.script", MODEL, result="scripted"),))

    def reproduce(self, ctx: StageContext) -> str:
        return reproduced(self.call(ctx), "torch.jit.save(scripted, os.path.join(HERE, 'model.script.pt'))\n"
                          "loaded = torch.jit.load(os.path.join(HERE, 'model.script.pt'))\n"
                          "def run(args, kwargs):\n    with torch.no_grad():\n        return loaded(*args, **kwargs)\n"
                          "return run\n")
