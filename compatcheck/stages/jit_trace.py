"""jit_trace: torch.jit.trace on input set 1 under no_grad, with the API's defaults (the trace checked
against a second run, check_trace=True), saved and loaded back.

Tracing records one path through the code; running the other input sets is what shows a frozen
branch or shape. TracerWarnings are kept for the diagnosis.
"""

from __future__ import annotations

import copy
import dataclasses
import inspect
from keyword import iskeyword

import torch
from torch.utils import _pytree as pytree

from compatcheck.report.model import Finding
from compatcheck.recipes import Recipe
from compatcheck.stage_call import ARGS, MODEL, Name, StageCall, step
from compatcheck.stages.base import Stage, StageContext, reproduced
from compatcheck.torch_features import TORCHSCRIPT_TRACE
from compatcheck.stages.jit_script import run_loaded


# The trace as it is, not checked against a second run: where that check fails (a graph that differs
# across runs), the trace may still compute the right thing on every input set.
UNCHECKED = Recipe("check_trace=False (the trace not checked against a second run)", keywords=(("check_trace", False),))


def tensors_of(value) -> list:
    """The tensors in `value`, in order: pytree's leaves, and an object pytree does not know (a library's
    cache, say) opened into its attributes."""
    found = []
    for leaf in torch.utils._pytree.tree_leaves(value):
        if isinstance(leaf, torch.Tensor):
            found.append(leaf)
        elif hasattr(leaf, "__dict__") and not isinstance(leaf, type):
            found += tensors_of(list(vars(leaf).values()))
    return found


def rebuilt(template, tensors):
    """`template` (one eager call's outputs) with its tensors replaced by `tensors`, in tensors_of's order."""
    tensors = iter(tensors)

    def put(leaf):
        if isinstance(leaf, torch.Tensor):
            return next(tensors)
        if hasattr(leaf, "__dict__") and not isinstance(leaf, type):
            for name, held in list(vars(leaf).items()):
                setattr(leaf, name, torch.utils._pytree.tree_map(put, held))
        return leaf

    return torch.utils._pytree.tree_map(put, copy.deepcopy(template))


class FlatOutputs(torch.nn.Module):
    """The model, its outputs flattened to a tuple of tensors, which torch.jit.trace can return."""

    def __init__(self, model):
        super().__init__()
        self.model = model

    def forward(self, *args):
        return tuple(tensors_of(self.model(*args)))


# After the trace: the outputs in forward's structure again, with one eager call's outputs as the template.
REBUILD = "outputs = rebuilt(model(*args), traced(*args))  # forward's structure, one eager call's as the template"
REBUILD_KEYWORDS = REBUILD.replace("(*args)", "(**keywords)")
_HELPERS = "import copy\n\n\n" + inspect.getsource(tensors_of) + "\n\n" + inspect.getsource(rebuilt) + "\n\n"
# Names the wrapper's forward reads itself, so no parameter may take them.
_TAKEN = {"self", "torch"}


def keyword_source(names: list[str]) -> str:
    """FlatOutputs for a call by keywords: torch.jit.trace's example_kwarg_inputs binds them by forward's
    parameter names, which a **kwargs forward has none of, so each is a parameter of its own."""
    passed = ", ".join(f"{name}={name}" for name in names)
    return _HELPERS + inspect.getsource(FlatOutputs).replace("*args):", f"{', '.join(names)}):").replace(
        "self.model(*args)", f"self.model({passed})")


def flat_recipe(names: list[str] | None = None) -> Recipe:
    """The flat wrapper, traced from the sample's arguments, or by `names` from its keywords."""
    before = keyword_source(names) if names else _HELPERS + inspect.getsource(FlatOutputs)
    return Recipe("a wrapper whose forward returns the outputs' tensors flat (FlatOutputs), the structure rebuilt "
                  "from one eager call's", flat=True, before=before, then=REBUILD_KEYWORDS if names else REBUILD)


def keyword_names(ctx: StageContext) -> list[str] | None:
    """The sample's names as keywords, where each can be a parameter of the wrapper; None where not."""
    sample = ctx.sample
    keywords = sample.as_keywords(ctx.spec.signature) if sample.args else sample.kwargs
    if keywords is None:  # forward's signature cannot name the positional ones
        return None
    names = list(keywords)  # from the model file: only identifiers reach the wrapper's code
    valid = all(name.isidentifier() and not iskeyword(name) and name not in _TAKEN for name in names)
    return names if valid else None


def defined(source: str) -> dict:
    """The wrapper class and its helpers as the recipe's code defines them, so what runs is what the user
    is shown."""
    scope = {"torch": torch}
    exec(compile(source, "<FlatOutputs>", "exec"), scope)
    return scope


def dataclasses_in(output) -> list[type]:
    """The dataclasses among the output's pytree leaves (pytree does not know them), nested ones too."""
    found: list[type] = []
    for leaf in pytree.tree_leaves(output):
        if dataclasses.is_dataclass(leaf) and not isinstance(leaf, type):
            inner = dataclasses_in([getattr(leaf, field.name) for field in dataclasses.fields(leaf)])
            found += [one for one in (type(leaf), *inner) if one not in found]
    return found


class JitTrace(Stage):
    name = "jit_trace"
    same_random = True

    def __init__(self):
        self.traced = None
        self.registered: list[type] = []  # dataclasses the flat recipe registered with pytree, until close()

    def needs(self, ctx: StageContext):
        return (TORCHSCRIPT_TRACE,)

    def call(self, ctx: StageContext) -> StageCall:
        if ctx.recipe is not None and ctx.recipe.flat:
            return self._flat_call(ctx)
        if ctx.sample.kwargs:  # a mixed call is traced as keywords: jit.trace takes one or the other
            return StageCall((step("torch.jit.trace", MODEL, example_kwarg_inputs=Name("keywords"), **ctx.keywords,
                                   result="traced"),), "keywords: the sample's arguments, all as keywords")
        return StageCall((step("torch.jit.trace", MODEL, ARGS, **ctx.keywords, result="traced"),))

    def _flat_call(self, ctx: StageContext) -> StageCall:
        """The trace of FlatOutputs(model), after registering the output's dataclasses with pytree."""
        registers = (step("torch.utils._pytree.register_dataclass", Name(one.__name__))
                     for one in dataclasses_in(ctx.reference[ctx.recipe.sample]))
        by_keyword = bool(ctx.sample.kwargs)  # as the plain call: a mixed call is traced as keywords
        sample = {"example_kwarg_inputs": Name("keywords")} if by_keyword else {}
        trace = step("torch.jit.trace", Name("flat"), *(() if by_keyword else (ARGS,)), **sample, **ctx.keywords,
                     result="traced")
        return StageCall((*registers, step("FlatOutputs", MODEL, result="flat"), trace),
                         "keywords: the sample's arguments, all as keywords" if by_keyword else None)

    def build(self, ctx: StageContext):
        flat = ctx.recipe is not None and ctx.recipe.flat
        if flat:  # the call registers them; close() takes them back, so no later stage sees them
            self.registered = dataclasses_in(ctx.reference[ctx.recipe.sample])
        with torch.no_grad():
            helpers = defined(ctx.recipe.before) if flat else {}
            traced = self.run_call(ctx, FlatOutputs=helpers.get("FlatOutputs"),
                                   **{one.__name__: one for one in self.registered})
        self.traced = traced
        path = ctx.artifact("model.trace.pt")
        torch.jit.save(traced, str(path))
        ctx.artifacts[self.name] = str(path)
        run = run_loaded(torch.jit.load(str(path)))
        if not flat:
            return run
        template = ctx.reference[ctx.recipe.sample]
        return lambda input_set: helpers["rebuilt"](template, run(input_set))

    def note(self, ctx: StageContext) -> str | None:
        from compatcheck.diagnose.device import trace_note

        return trace_note(self.traced, ctx.spec.user) if self.traced is not None else None

    def intermediates(self, ctx: StageContext, input_set):
        from compatcheck.diagnose.script_sizes import artifact_shapes

        return artifact_shapes(self.traced, ctx.spec.user, input_set) if self.traced is not None else None

    def diagnose(self, ctx: StageContext, error: BaseException | None) -> list[Finding]:
        from compatcheck.diagnose.sample import first_if_size_one
        from compatcheck.diagnose.torchscript import trace_findings

        return first_if_size_one(self.name, ctx, trace_findings(self.name, ctx, error))

    def recipes(self, ctx: StageContext, error: BaseException | None) -> list[Recipe]:
        from compatcheck.diagnose.sample import sample_recipes
        from compatcheck.diagnose.torchscript import refused_output

        found = sample_recipes(ctx, error)
        names = keyword_names(ctx) if ctx.sample.kwargs else None
        if refused_output(error) and (names or not ctx.sample.kwargs):
            found.append(flat_recipe(names))
        # Where forward keeps state, the check is right: a trace without it answers like the first call forever.
        if error is not None and type(error).__name__ == "TracingCheckError" and not ctx.kept:
            found.append(UNCHECKED)
        return found

    def reproduce(self, ctx: StageContext) -> str:
        return reproduced(self.call(ctx), "torch.jit.save(traced, os.path.join(HERE, 'model.trace.pt'))\n"
                          "loaded = torch.jit.load(os.path.join(HERE, 'model.trace.pt'))\n"
                          "def run(args, kwargs):\n    with torch.no_grad():\n        return loaded(*args, **kwargs)\n"
                          "return run\n")

    def close(self) -> None:
        for one in self.registered:
            if one in pytree.SUPPORTED_NODES:
                pytree._deregister_pytree_node(one)
        self.registered = []
