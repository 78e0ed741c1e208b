"""openvino: the route to Intel CPUs as a deployer walks it, at every default: openvino.convert_model (its
PyTorch frontend traces the model; the dims the input sets vary in are passed as dynamic), saved with
openvino.save_model and compiled from that file for the CPU plugin (openvino.compile_model(path, "CPU")),
then run on every input set and swept size.

Those defaults lower precision on their own: save_model stores the weights in float16 (compress_to_fp16),
and the CPU plugin computes in bfloat16 where the processor has bf16 instructions. That is what ships,
so it is what the verdict is about; float32 in either place is a recipe, offered only where proven."""

from __future__ import annotations

import copy
import shutil

import torch

from compatcheck.errors import restated
from compatcheck.recipes import Recipe
from compatcheck.report.model import Finding
from compatcheck.spec import dynamic_dims
from compatcheck.stage_call import ARGS, MODEL, PATH, Name, StageCall, step
from compatcheck.stages.base import Stage, StageContext, bound, reproduced

ARTIFACT = "model.openvino.xml"  # with model.openvino.bin beside it
INSTALL = "pip install 'compatcheck[openvino]'"
F32_HINT = (("INFERENCE_PRECISION_HINT", "f32"),)
UNCOMPRESSED = (("compress_to_fp16", False),)
# The two defaults that lower precision, each alone (the cheaper change first), then both.
PRECISION = (Recipe('config={"INFERENCE_PRECISION_HINT": "f32"} (the CPU plugin computes in float32)',
                    session=F32_HINT),
             Recipe("compress_to_fp16=False (save_model keeps the weights in float32)", keywords=UNCOMPRESSED),
             Recipe('compress_to_fp16=False and config={"INFERENCE_PRECISION_HINT": "f32"} (float32 throughout)',
                    keywords=UNCOMPRESSED, session=F32_HINT))


def missing() -> str | None:
    """Why the stage cannot run here, or None."""
    try:
        import openvino  # noqa: F401
    except ImportError:
        return f"openvino is not installed: {INSTALL}"
    return None


def input_shapes(ctx: StageContext, by_name: bool):
    """convert_model's `input`: each tensor's shape with -1 at the dims the input sets vary in, by name where
    the sample is passed by keyword; None where the call's arguments are not one tensor each (OpenVINO then
    picks the dims itself)."""
    sample = ctx.sample  # each read copies the input set: the dims are matched to this copy's tensors
    keywords = ((sample.as_keywords(ctx.spec.signature) if sample.args else None) or sample.kwargs) if by_name \
        else None
    values = list(keywords.values()) if by_name else list(sample.args)
    if not values or not all(isinstance(value, torch.Tensor) for value in values):
        return None
    # The declared dims are per tensor in the call's order; keywords may come in the signature's.
    declared = {id(leaf): dims for leaf, dims in zip(sample.leaves(), dynamic_dims(ctx.spec))}
    shapes = [[-1 if dim in declared.get(id(value), ()) else size for dim, size in enumerate(value.shape)]
              for value in values]
    return dict(zip(keywords, shapes)) if by_name else shapes


class OpenVino(Stage):
    name = "openvino"
    flat_outputs = True

    def __init__(self):
        self.compiled = None
        self.failure: BaseException | None = None  # the conversion's error, for the diagnosis
        self.found: list[Finding] = []

    def available(self, ctx: StageContext) -> str | None:
        return missing()

    def call(self, ctx: StageContext) -> StageCall:
        by_name = bool(ctx.sample.kwargs)
        config = dict(ctx.recipe.session) if ctx.recipe and ctx.recipe.session else None
        shapes = input_shapes(ctx, by_name)
        return StageCall((
            step("openvino.convert_model", MODEL, example_input=Name("keywords") if by_name else ARGS,
                 **({"input": shapes} if shapes is not None else {}), result="ov_model"),
            step("openvino.save_model", Name("ov_model"), PATH, **ctx.keywords),
            step("openvino.compile_model", PATH, "CPU", **({"config": config} if config else {}),
                 result="compiled"),
        ), "path: where the OpenVINO IR (.xml, with its .bin) is written")

    def build(self, ctx: StageContext):
        path = str(ctx.artifact(ARTIFACT))
        model_on_cpu = {}
        if ctx.options.device != "cpu":  # OpenVINO's GPU plugin is for Intel GPUs: the route stays on the CPU
            sample = ctx.sample.map(lambda leaf: leaf.cpu())
            model_on_cpu = {"model": copy.deepcopy(ctx.spec.model).cpu(), "args": sample.args,
                            "kwargs": sample.kwargs or None}
        self.call_ran = call = self.call(ctx)
        try:
            with torch.no_grad():
                self.compiled = call.run(**{**bound(ctx), **model_on_cpu, "path": path})
        except Exception as exc:
            from compatcheck.diagnose.openvino import restate

            self.failure = restated(restate(self.name, ctx, exc), exc)
            raise self.failure
        ctx.artifacts[self.name] = path
        compiled = self.compiled
        names = [next(iter(one.get_names()), f"input{i}") for i, one in enumerate(compiled.inputs)]

        def run(input_set):
            arrays = input_set.map(lambda leaf: leaf.detach().cpu()).arrays_for(names, "the OpenVINO model")
            return list(compiled(arrays).to_tuple())

        return run

    def backend(self, ctx: StageContext) -> str | None:
        from compatcheck.diagnose.openvino import precision_chosen

        if self.compiled is None:
            return None
        import openvino

        return f"OpenVINO {openvino.__version__.split('-')[0]} CPU plugin, {precision_chosen(self.compiled)}"

    def note(self, ctx: StageContext) -> str | None:
        if ctx.options.device != "cpu":
            return "ran on the CPU plugin: OpenVINO's GPU plugin is for Intel GPUs, not CUDA"
        return None

    def diagnose(self, ctx: StageContext, error: BaseException | None) -> list[Finding]:
        from compatcheck.diagnose.openvino import openvino_findings

        self.found = openvino_findings(self.name, ctx, error or self.failure, self.compiled,
                                       ctx.artifacts.get(self.name), lambda: self._float32(ctx))
        return self.found

    def _float32(self, ctx: StageContext):
        """The route in float32 throughout (the last PRECISION recipe), built in a folder of its own that
        goes once it is compiled: the runner holds what it runs."""
        scratch = copy.copy(ctx)
        scratch.recipe, scratch.artifacts = PRECISION[-1], dict(ctx.artifacts)
        scratch.artifact_dir = ctx.workdir / "recipes" / f"{self.name}-float32"
        try:
            return OpenVino().build(scratch)
        finally:
            shutil.rmtree(scratch.artifact_dir, ignore_errors=True)

    def recipes(self, ctx: StageContext, error: BaseException | None) -> list[Recipe]:
        from compatcheck.diagnose.sample import sample_recipes

        lowered = any(finding.kind == "reduced-precision" for finding in self.found)
        return sample_recipes(ctx, error or self.failure) + (list(PRECISION) if lowered else [])

    def reproduce(self, ctx: StageContext) -> str:
        return "import openvino\nfrom compatcheck.spec import InputSet\n" + reproduced(self.call(ctx),
                          "names = [next(iter(i.get_names()), f'input{n}') for n, i in enumerate(compiled.inputs)]\n"
                          "def run(args, kwargs):\n"
                          "    arrays = InputSet(args, kwargs).arrays_for(names, 'the OpenVINO model')\n"
                          "    return list(compiled(arrays).to_tuple())\n"
                          "return run\n", path=ARTIFACT)
