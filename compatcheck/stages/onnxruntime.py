"""onnxruntime: the exported ONNX file in an InferenceSession with the providers a deployer lists for the
device (--device cuda: TensorRT where present, CUDA, then the CPU); the backend says which ran the nodes."""

from __future__ import annotations

from compatcheck.onnxruntime_session import (feeds, nodes_by_provider, profiled, providers, session_options,
                                             unavailable)
from compatcheck.recipes import Recipe
from compatcheck.report.model import Finding
from compatcheck.stages.base import Stage, StageContext


class OnnxRuntime(Stage):
    name = "onnxruntime"
    flat_outputs = True

    def __init__(self):
        self.session = None
        self.asked: list[str] = []
        self.ran = None  # nodes per provider in the first run
        self.failure: BaseException | None = None  # a node failing at run time, for the diagnosis
        self.found: list[Finding] = []  # the diagnosis's findings, for the recipes they call for

    def available(self, ctx: StageContext) -> str | None:
        return unavailable(ctx.options.device)

    def build(self, ctx: StageContext):
        import onnxruntime


        # A recipe's session options: onnxruntime's optimization level, by name.
        settings = {name: getattr(onnxruntime.GraphOptimizationLevel, level)
                    for name, level in (ctx.recipe.session if ctx.recipe else ())}
        options = session_options(**settings)
        profiled(options, ctx.artifact_dir or ctx.workdir)
        self.asked = providers(ctx.options.device)
        self.session = onnxruntime.InferenceSession(ctx.artifacts["onnx_export"], options, providers=self.asked)

        def run(input_set):
            try:
                outputs = self.session.run(None, feeds(self.session, input_set))
            except Exception as exc:
                self.failure = self.failure or exc
                raise
            if self.ran is None:
                self.ran = nodes_by_provider(self.session)
            return outputs

        return run

    def backend(self, ctx: StageContext) -> str | None:
        if self.session is None:
            return None
        import onnxruntime

        loaded = self.session.get_providers()
        # onnxruntime falls back to the next provider where one does not load: say so
        dropped = [name for name in self.asked if name not in loaded]
        not_loaded = f" ({', '.join(dropped)} asked for, not loaded)" if dropped else ""
        if not self.ran:
            return f"onnxruntime {onnxruntime.__version__} {loaded[0]}{not_loaded}"
        counts = sorted(self.ran.items(), key=lambda item: -item[1])
        ran = ", ".join(f"{count}{' nodes' if i == 0 else ''} on {name}" for i, (name, count) in enumerate(counts))
        return f"onnxruntime {onnxruntime.__version__}{not_loaded}: {ran}"

    def upcast(self, ctx: StageContext) -> str | None:
        from compatcheck.onnxruntime_session import upcast_ops

        if self.session is None:
            return None
        provider = self.session.get_providers()[0]
        ops = upcast_ops(ctx.artifacts["onnx_export"], self.session.get_providers())
        dtype = str(ctx.reduced).removeprefix("torch.")
        return (f"{provider} computes {', '.join(ops)} in float32: its optimizer wraps them in Casts from "
                f"{dtype} and back") if ops else None

    def diagnose(self, ctx: StageContext, error: BaseException | None) -> list[Finding]:
        from compatcheck.diagnose.onnxruntime import runtime_findings
        from compatcheck.diagnose.sample import first_if_size_one

        self.found = first_if_size_one(self.name, ctx, runtime_findings(self.name, ctx, error or self.failure,
                                                                        self.session))
        return self.found

    def recipes(self, ctx: StageContext, error: BaseException | None) -> list[Recipe]:
        from compatcheck.diagnose.sample import sample_recipes
        from compatcheck.stages.onnx_export import other_exporter

        # The ONNX file is built from the sample by one exporter: a recipe builds it again from another sample,
        # or by the other exporter (recipe_search.py).
        return sample_recipes(ctx, error or self.failure) + self._lower_levels() + other_exporter(ctx)

    def _lower_levels(self) -> list[Recipe]:
        """Where the diagnosis blamed onnxruntime's optimizer: the session at each lower level, the highest
        first (the search ends at the first that passes everywhere)."""
        from compatcheck.diagnose.ort_optimizer import LEVELS

        if not any(finding.kind == "runtime-optimizer" for finding in self.found):
            return []
        return [Recipe(f"graph_optimization_level={level} (onnxruntime's SessionOptions)",
                       session=(("graph_optimization_level", level),)) for level in reversed(LEVELS[:-1])]

    def reproduce(self, ctx: StageContext) -> str:
        return (
            "import onnxruntime\nfrom compatcheck.spec import InputSet\n"
            "session = onnxruntime.InferenceSession(os.path.join(HERE, 'model.onnx'),\n"
            f"                                       providers={providers(ctx.options.device)!r})\n"
            "names = [i.name for i in session.get_inputs()]\n"
            "def run(args, kwargs):\n"
            "    arrays = InputSet(args, kwargs).arrays_for(names, 'the ONNX model')\n"
            "    return session.run(None, dict(zip(names, arrays)))\n"
            "return run\n"
        )
