"""compile and compile_fullgraph: torch.compile with graph breaks allowed, then forbidden."""

from __future__ import annotations

import torch

from compatcheck.recipes import Recipe
from compatcheck.report.model import Finding
from compatcheck.stage_call import MODEL, Shaped, StageCall, step
from compatcheck.diagnose.dynamo import recompile_reason
from compatcheck.stages.base import NotSwept, Stage, StageContext, reproduced
from compatcheck.torch_features import TORCH_COMPILE


class Compile(Stage):
    name = "compile"
    fullgraph = False
    static = Recipe("dynamic=False (a graph per input size)", keywords=(("dynamic", False),))
    new_shapes = ("torch.compile may compile again for them, with automatic dynamic shapes, which can take far "
                  "longer than the first compile; raise --timeout, or mark the dimensions that vary dynamic before "
                  "the first call with torch._dynamo.mark_dynamic")

    def __init__(self):
        self.failure: BaseException | None = None  # compiling happens on the first call, inside the runner
        self.graphs: int | None = None  # graphs dynamo made for the input sets and the swept ones

    def needs(self, ctx: StageContext):
        return (TORCH_COMPILE,)

    def inductor(self, options) -> bool:
        return options.compile_backend == "inductor"

    def build(self, ctx: StageContext):
        from torch._dynamo.utils import counters

        torch._dynamo.reset()
        counters.clear()
        compiled = self.run_call(ctx)

        # As torch.compile does by default: static for the first size, dynamic once a second one comes
        # (automatic dynamic shapes), so the swept sizes reuse that graph; only sizes 0 and 1 specialize.
        def run(input_set):
            try:
                return call(input_set)
            finally:
                self.graphs = counters["stats"]["unique_graphs"]

        def call(input_set):
            if self.fullgraph and self.failure is not None:
                # Compiling again for the next input set's shapes fails the same way, and can take minutes.
                raise RuntimeError("not compiled again: compiling with fullgraph=True already failed (see the "
                                   "first input set)")
            try:
                with torch.no_grad():
                    return compiled(*input_set.args, **input_set.kwargs)
            except Exception as exc:
                if recompile_reason(exc) is None:  # the sweep's refusal to compile again is no failure of the model
                    self.failure = self.failure or exc
                raise

        return run

    def sweep_runner(self, ctx: StageContext, runner):
        """The compiled graphs, held to what they cover: a swept size that would make torch.compile compile
        again (batch 1, where 0/1 specialization bites) is not compiled for; dynamo's reason is recorded."""
        from compatcheck.torch_features import COMPILER_STANCE, missing

        if missing(COMPILER_STANCE) is not None:
            return runner

        def run(input_set):
            try:
                with torch.compiler.set_stance("fail_on_recompile"):
                    return runner(input_set)
            except RuntimeError as exc:
                reason = recompile_reason(exc)
                if reason is None:
                    raise
                raise NotSwept(f"torch.compile would compile again for it ({reason})") from exc

        return run

    def available(self, ctx: StageContext) -> str | None:
        backend = ctx.options.compile_backend
        if backend in torch._dynamo.list_backends(exclude_tags=()):
            return None
        install = "pip install 'compatcheck[openvino]'" if backend == "openvino" else \
            "install the package that registers it"
        return f"torch.compile has no backend {backend!r} here: {install}"

    def environment(self, ctx: StageContext, error: BaseException | None) -> str | None:
        from compatcheck.diagnose.broken_env import backend_fault

        return super().environment(ctx, error) or backend_fault(ctx, ctx.options.compile_backend, self.fullgraph,
                                                                self.failure or error)

    def backend(self, ctx: StageContext) -> str:
        if not self.graphs:
            return ctx.options.compile_backend
        return f"{ctx.options.compile_backend}; {self.graphs} graph{'s' if self.graphs > 1 else ''} compiled"

    def diagnose(self, ctx: StageContext, error: BaseException | None) -> list[Finding]:
        from compatcheck.diagnose.dynamo import graph_break_findings
        from compatcheck.diagnose.torch_bug import torch_reproduced

        found = graph_break_findings(self.name, ctx, error or self.failure, self.fullgraph)
        return torch_reproduced(self.name, ctx, found, error or self.failure)

    def call(self, ctx: StageContext) -> StageCall:
        return StageCall((step("torch.compile", MODEL, fullgraph=self.fullgraph,
                               backend=Shaped(ctx.options.compile_backend, "compile_backend"), **ctx.keywords,
                               result="compiled"),))

    def reproduce(self, ctx: StageContext) -> str:
        return "torch._dynamo.reset()\n" + reproduced(
            self.call(ctx), "def run(args, kwargs):\n    with torch.no_grad():\n        return compiled(*args, **kwargs)\n"
            "return run\n")


class CompileFullgraph(Compile):
    name = "compile_fullgraph"
    fullgraph = True
