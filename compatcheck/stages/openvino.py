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
from compatcheck.diagnose.openvino import PRECISION, openvino_findings, precision_chosen, restate
from compatcheck.recipes import Recipe
from compatcheck.report.model import Finding
from compatcheck.spec import dynamic_dims
from compatcheck.stage_call import ARGS, MODEL, PATH, Name, StageCall, step
from compatcheck.stages.base import Stage, StageContext, bound, keywords_of, reproduced

ARTIFACT = "model.openvino.xml"  # with model.openvino.bin beside it
INSTALL = "pip install 'compatcheck[openvino]'"


def _runner(compiled):
    """Run a compiled model on an input set, its tensors fed by the model's input names."""
    names = [next(iter(one.get_names()), f"input{i}") for i, one in enumerate(compiled.inputs)]

    def run(input_set):
        arrays = input_set.map(lambda leaf: leaf.detach().cpu()).arrays_for(names, "the OpenVINO model")
        return list(compiled(arrays).to_tuple())

    return run


def missing() -> str | None:
    """Why the stage cannot run here, or None."""
    try:
        import openvino  # noqa: F401
    except ImportError:
        return f"openvino is not installed: {INSTALL}"
    return None


def decline_telemetry() -> None:
    """OpenVINO's conversions send telemetry unless the user opted out or CI=true, each event from a
    process forked off the converting one: here the worker, whose threads (inductor's probe, torch's pools)
    a fork can leave holding locks in the child, and which has 2-3 s of CPU to pay for the forks on a small
    model. compatcheck's conversions are checks, not the user's use of OpenVINO: the worker declines them."""
    try:
        from openvino.tools.ovc.telemetry_utils import init_ovc_telemetry
    except ImportError:
        return
    init_ovc_telemetry().consent = False


def input_shapes(ctx: StageContext, by_name: bool):
    """convert_model's `input`: each tensor's shape with -1 at the dims the input sets vary in, by name where
    the sample is passed by keyword; None where the call's arguments are not one tensor each (OpenVINO then
    picks the dims itself)."""
    sample = ctx.sample  # each read copies the input set: the dims are matched to this copy's tensors
    keywords = keywords_of(ctx, sample) if by_name else None
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
        self.enough: Recipe | None = None  # the least precision recipe the diagnosis saw answer as eager does

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
        decline_telemetry()
        try:
            with torch.no_grad():
                self.compiled = call.run(**{**bound(ctx), **model_on_cpu, "path": path})
        except Exception as exc:
            self.failure = restated(restate(self.name, ctx, exc), exc)
            raise self.failure
        ctx.artifacts[self.name] = path
        return _runner(self.compiled)

    def backend(self, ctx: StageContext) -> str | None:
        if self.compiled is None:
            return None
        import openvino

        return f"OpenVINO {openvino.__version__.split('-')[0]} CPU plugin, {precision_chosen(self.compiled)}"

    def note(self, ctx: StageContext) -> str | None:
        if ctx.options.device != "cpu":
            return "ran on the CPU plugin: OpenVINO's GPU plugin is for Intel GPUs, not CUDA"
        return None

    def diagnose(self, ctx: StageContext, error: BaseException | None) -> list[Finding]:
        folder = ctx.workdir / "recipes" / f"{self.name}-float32"
        # The dims each input of the converted model was asked to keep dynamic, in its inputs' order.
        asked = input_shapes(ctx, bool(ctx.sample.kwargs))
        asked = asked.values() if isinstance(asked, dict) else asked
        dynamic = [{dim for dim, size in enumerate(shape) if size == -1} for shape in asked] if asked is not None \
            else dynamic_dims(ctx.spec)
        try:
            found, self.enough = openvino_findings(self.name, ctx, error or self.failure, self.compiled, dynamic,
                                                   ctx.artifacts.get(self.name),
                                                   lambda recipe: self._undone(ctx, recipe, folder))
        finally:
            shutil.rmtree(folder, ignore_errors=True)
        return found

    def _undone(self, ctx: StageContext, recipe: Recipe, folder):
        """A runner of the route with `recipe` (one of PRECISION): the float32 hint compiles the stage's own IR
        again; float32 weights convert the model once more, into `folder`, which the variants share."""
        import openvino

        path = ctx.artifacts[self.name]
        if recipe.keywords:
            path = str(folder / ARTIFACT)
            if not (folder / ARTIFACT).exists():
                scratch = copy.copy(ctx)
                scratch.recipe, scratch.artifacts, scratch.artifact_dir = PRECISION[1], dict(ctx.artifacts), folder
                OpenVino().build(scratch)
        return _runner(openvino.compile_model(path, "CPU", dict(recipe.session) or None))

    def recipes(self, ctx: StageContext, error: BaseException | None) -> list[Recipe]:
        from compatcheck.diagnose.sample import sample_recipes

        # The diagnosis found the least that answers every input set that differed: the search proves it on
        # every input set and swept size.
        return sample_recipes(ctx, error or self.failure) + ([self.enough] if self.enough else [])

    def reproduce(self, ctx: StageContext) -> str:
        return "import openvino\nfrom compatcheck.spec import InputSet\n" + reproduced(self.call(ctx),
                          "names = [next(iter(i.get_names()), f'input{n}') for n, i in enumerate(compiled.inputs)]\n"
                          "def run(args, kwargs):\n"
                          "    arrays = InputSet(args, kwargs).arrays_for(names, 'the OpenVINO model')\n"
                          "    return list(compiled(arrays).to_tuple())\n"
                          "return run\n", path=ARTIFACT)
