"""The one interface every stage implements, and the context the worker hands it.

A stage builds a runner (a callable taking one InputSet and returning outputs); the harness
calls it on every input set, compares, times and collects findings the same way for all.
"""

from __future__ import annotations

import copy
import reprlib
import textwrap
import time
import warnings
from contextlib import nullcontext
from pathlib import Path
from typing import Callable

import torch

from compatcheck.compare import VALUES, Tolerances, flatten, to_tensor
from compatcheck.errors import UsageError
from compatcheck.nesting import refuse_deep
from compatcheck.options import RunOptions
from compatcheck.protocol import SandboxFolders
from compatcheck.recipes import Recipe
from compatcheck.report.model import Finding, ServedLoad
from compatcheck.spec import InputSet, ModelSpec
from compatcheck.stage_call import StageCall
from compatcheck.state import Place, model_places, rewind_model, taken
from compatcheck import state
from compatcheck.torch_features import Feature
from compatcheck.variation import SEEDS, reseed, Site, Variation, clock_moved, drawing_ops

Runner = Callable[[InputSet], object]


class NotSwept(Exception):
    """A swept size the stage does not run, and why (torch.compile: it would compile again for it)."""


class Stage:
    name: str = ""
    flat_outputs = False  # outputs come back as a flat list of leaves (ONNX), not eager's structure
    proven_by: str | None = None  # the stage that runs what this one makes, when its own runner is not that
    # What the stage does for an input set whose shapes it has not run yet, where that can take long.
    new_shapes: str | None = None
    # The artifact runs torch's own kernels, so under eager's seed it draws eager's random numbers: its
    # random outputs are compared by value.
    same_random = False
    serves = False  # it has a load run (under_load)
    # The build with static sizes, tried where torch alone fails on symbolic ones (a torch-bug finding).
    static: Recipe | None = None
    call_ran: StageCall | None = None  # the call build() ran, as the report shows it

    def needs(self, ctx: "StageContext") -> tuple[Feature, ...]:
        """The torch features the stage uses with these options (see torch_features.py)."""
        return ()

    def available(self, ctx: "StageContext") -> str | None:
        """None when the stage can run here, else the reason it cannot (a missing optional package)."""
        return None

    def build(self, ctx: "StageContext") -> Runner | None:
        """Build the artifact; return its runner, or None when the stage produces nothing to run."""
        raise NotImplementedError

    def sweep_runner(self, ctx: "StageContext", runner: Runner) -> Runner:
        """The runner for the swept sizes: `runner`, unless the stage leaves some sizes out; then it raises
        NotSwept for those, saying why."""
        return runner

    def inductor(self, options: RunOptions) -> bool:
        """Whether the build compiles with inductor, whose one-time setup the worker starts making as soon
        as it starts (worker/inductor.py)."""
        return False

    def timed_runners(self, runner: Runner) -> dict[str, Runner]:
        """What --bench times, by label: the runner itself unless a stage serves several ways."""
        return {self.name: runner}

    def diagnose(self, ctx: "StageContext", error: BaseException | None) -> list[Finding]:
        """Findings from what the stage saw: the error if it failed, warnings, the artifact."""
        return []

    def intermediates(self, ctx: "StageContext", input_set: InputSet) -> list | None:
        """The shape of the tensor each line of the user's code ends with in the artifact on `input_set`, in
        the order the lines ran ([((file, line), shape)], diagnose/script_sizes.py); None where the artifact
        does not show them."""
        return None

    def backend(self, ctx: "StageContext") -> str | None:
        return None

    def environment(self, ctx: "StageContext", error: BaseException | None) -> str | None:
        """Where the stage failed for a reason no model gets past (a library that cannot import what it
        needs): what, and the fix; None where the failure is a verdict on the model."""
        from compatcheck.diagnose.broken_env import fault

        found = fault(error)
        return f"{found[0]}; fix: {found[1]}" if found else None

    def upcast(self, ctx: "StageContext") -> str | None:
        """With --dtype: what the backend computes in float32 instead, on its own, in words; None when
        it computes in the dtype (or does not say)."""

    def note(self, ctx: "StageContext") -> str | None:
        """A note for the reason of a pass: what the artifact holds that limits where it runs, or what was
        not checked."""
        return None

    def reproduce(self, ctx: "StageContext") -> str:
        """Python lines that, after the common prelude (model, inputs), rebuild this stage's artifact."""
        return ""

    def recipes(self, ctx: "StageContext", error: BaseException | None) -> list[Recipe]:
        """Other ways to build it worth trying when the plain call failed (its error, or None for a
        mismatch); each is tried on a pristine model and offered only if it passes on every input set."""
        return []

    def call(self, ctx: "StageContext") -> StageCall | None:
        """The call that builds the artifact with ctx.recipe (None: the plain call), as one value that
        build() runs, a recipe shows and the reproducer writes; None where the stage makes no call."""
        return None

    def run_call(self, ctx: "StageContext", **files: str):
        """Run the stage's call on what it reads (bound()) and the files it writes; it becomes `call_ran`."""
        call = self.call(ctx)
        self.call_ran = call
        return call.run(**bound(ctx), **files)

    def under_load(self, ctx: "StageContext") -> ServedLoad | None:
        """After every input set passed: the artifact answering many requests at once, as a server
        batches them; None where the stage serves nothing. A `problem` in it makes the stage a mismatch."""
        return None

    def close(self) -> None:
        """Release what build() holds (servers, sessions); called whatever happened."""


class StageContext:
    """What stages share in one worker: the model, inputs, options, artifacts and the eager reference."""

    def __init__(self, spec: ModelSpec, options: RunOptions, workdir: Path, artifacts: dict[str, str],
                 previous: dict[str, str], blockers: dict[str, str] | None = None,
                 sandbox: SandboxFolders | None = None):
        self.spec = spec
        self.options = options
        self.workdir = workdir
        self.artifacts = artifacts
        self.previous = previous  # stage name -> status, for skip reasons
        self.blockers = dict(blockers or {})  # stage name -> its first finding in words, for skip reasons
        self.sandbox = sandbox or SandboxFolders()  # where the worker can make nothing new, for diagnosis
        self.warnings: list[tuple[warnings.WarningMessage, list]] = []
        self.input_results: list = []  # the current stage's InputSetResults, for its diagnosis
        self.runner = None  # the current stage's artifact as a callable, for a diagnosis that runs it
        self.flat_outputs = False  # whether that artifact returns its outputs flattened
        self.stage_seconds = 0.0  # how long the current stage took to build and run, for diagnosis budgets
        self._reference: list | None = None
        self._noise: list | None = None
        self.mutated_inputs: list[int] = []  # input sets whose tensors forward changed in place
        self._fp64: dict[int, object] = {}
        self._float32: dict[int, object] = {}
        self._float32_model = None
        self.float32_seconds = 0.0  # how long the float32 answers took to compute, for the precision search budget
        self.variation = Variation()
        self._kept: list[Place] = []
        self.state_lines: dict | None = None  # each kept piece of state -> the user's line that writes it
        self.recipe: Recipe | None = None  # how the current build differs from the plain call
        self._sweep = None
        self.artifact_dir: Path | None = None  # where a recipe's build writes, away from the stage's own files
        # Tells the parent what the current stage is doing (protocol.Step), for a timeout's or crash's reason.
        self.step: Callable[..., None] = lambda what, **phase: None

    @property
    def tolerances(self) -> Tolerances:
        """What every comparison of this run uses: --atol/--rtol over the model file's TOLERANCE."""
        return Tolerances(self.options.atol, self.options.rtol, self.spec.tolerance)

    def eager(self, input_set: InputSet, model=None):
        with torch.no_grad(), self.spec.covered.recording() if self.spec.covered else nullcontext():
            return (model or self.spec.model)(*input_set.args, **input_set.kwargs)

    def _copy(self):
        """A copy of the model as the factory built it, for one run of eager: what a call leaves behind (a
        buffer it updates, a counter it bumps) never reaches another run."""
        return self.spec.reference_copy()

    def seeded(self, input_set: InputSet, model, seed: int = SEEDS[0]):
        """One call of eager under `seed`, as every stage's artifact is called on every input set: each
        input set draws the same random numbers in every run."""
        reseed(seed)
        return self.eager(input_set, model)

    def first_calls(self, input_sets: list[InputSet], seed: int = SEEDS[0], make=None) -> list:
        """Each input set's answer from a pristine copy (`make`, by default `_copy`): one copy for them all,
        or, where forward keeps state, one copy each, so every answer is a first call."""
        make = make or self._copy
        model, answers = make(), []
        for index, input_set in enumerate(input_sets):
            if index and self._kept:
                model = make()
            answers.append(self.seeded(input_set, model, seed))
        return answers

    def rewind(self) -> None:
        """Put the state forward keeps back as before any call, on the stage's model and in the globals: each
        input set is then a first call, as eager's reference is."""
        pristine = self.spec.pristine
        if self._kept and pristine is not None:
            if pristine.model is not None:
                rewind_model(self.spec.model, pristine.model, self._kept)
            if pristine.globals is not None:
                pristine.globals.rewind()

    def _eager_runs(self, seed: int = SEEDS[0]) -> list:
        return self.first_calls(self.spec.input_sets, seed)

    def _state_kept(self, model, watched: list[Place], before: list) -> list[Place]:
        """What eager's first call changed (on `model`, its copy, and in the globals), where a second call on
        that copy answers otherwise than a first call on a pristine one: state kept across calls."""
        pristine = self.spec.pristine
        found = state.changed(watched, before, taken(model, {}, watched))
        held = pristine.globals if pristine else None
        found += held.changed() if held else []
        if held:
            held.kept = [place for place in found if place.kind == "global"]
        if not found:
            return []
        probe = self.spec.input_sets[min(1, len(self.spec.given_inputs) - 1)]  # another input where there is one
        if identical(self.seeded(probe, model), self.seeded(probe, self._copy())):
            if held:
                held.kept = []
            return []
        return found

    def _compute_reference(self) -> None:
        self.step("while running eager for the reference")
        model = self._copy()
        runs = self.spec.input_sets
        watched = model_places(model)
        before = taken(model, {}, watched)
        first = [self.seeded(runs[0], model)]
        self._kept = self._state_kept(model, watched, before)
        first += [self.seeded(s, self._copy() if self._kept else model) for s in runs[1:]]
        # A fresh tensor starts at version 0; every in-place write, through any view, bumps it.
        self.mutated_inputs = [i for i, s in enumerate(runs) if any(t._version for t in s.leaves())]
        _require_an_output(first)
        # Only identical calls on pristine copies show nondeterminism; the same copy called again shows state.
        second = self._eager_runs()
        self._reference = first
        self._noise = None if all(identical(a, b) for a, b in zip(first, second)) else second
        self.variation = self._variation(first)

    def _variation(self, first: list) -> Variation:
        """Whether eager's outputs change with the seed or with the clock, the ops and lines that make them,
        and which outputs of each input set change: runs with another seed, then with the clock moved."""
        found = Variation()
        user = self.spec.user
        reseeded = self._eager_runs(SEEDS[1])
        if not all(identical(a, b) for a, b in zip(first, reseeded)):
            # Only a forward found random is run again, under each seed, to name the ops that draw: the
            # recording mode costs an import of torch._dynamo that a deterministic eager-only run never needs.
            try:
                random = drawing_ops(self._eager_runs, user)
            except Exception:  # an op the recording mode cannot pass through: the seed's effect is named alone
                random = []
            if random or self._noise is None:
                found.random = random or [Site("random numbers", None)]
                found.random_leaves = _every_set(changed(a, b) for a, b in zip(first, reseeded))
        clock: list = []
        with clock_moved(user, clock):
            later = self.first_calls(self.spec.input_sets)
        if clock and not all(identical(a, b) for a, b in zip(first, later)):
            found.clock = clock
            found.clock_leaves = _every_set(changed(a, b) for a, b in zip(first, later))
        return found

    @property
    def reference(self) -> list:
        """Eager outputs per input set (raises what the model raises)."""
        if self._reference is None:
            self._compute_reference()
        return self._reference

    @property
    def kept(self) -> list[Place]:
        """The state forward keeps across calls (what its first call changed, where a second call answers
        otherwise than a first); empty when it keeps none."""
        self.reference
        return self._kept

    @property
    def noise(self) -> list | None:
        """A second eager run per input set when it differs from the first, else None."""
        self.reference
        return self._noise

    @property
    def swept(self):
        """The sweep (sweep.py): input sets of sizes the user's lack, with eager's outputs on them; made
        once per worker, on its own copy of the model. Empty with --sweep off or no dynamic dimension."""
        if self._sweep is None:
            from compatcheck.sweep import Sweep, build

            if self.options.sweep == "off" or self.spec.dynamic_shapes is None or self.varies:
                self._sweep = Sweep()
            else:
                model = self.spec.reference_copy()

                def run(input_set):
                    return self.first_calls([input_set])[0] if self.kept else self.seeded(input_set, model)

                from compatcheck.diagnose.shapes import compared_constants

                self._sweep = build(self.spec, run, self.options.sweep_budget, compared_constants(self))
        return self._sweep

    def unvalued(self, index: int, same_random: bool) -> set[int]:
        """The leaves of input set `index`'s outputs not to compare by value: those that change with the
        clock, and those that change with the seed unless the artifact draws torch's numbers."""
        variation = self.varies
        leaves = set(variation.clock_leaves[index]) if variation.clock_leaves else set()
        if variation.random and not same_random:
            leaves |= variation.random_leaves[index]
        return leaves

    @property
    def varies(self) -> Variation:
        """What makes eager's outputs change by design (random ops, the clock); empty when nothing does."""
        self.reference
        return self.variation

    def fp64(self, index: int):
        """Eager outputs for input set `index` computed in float64, or the exception where the model refuses:
        every input set in order on one copy, as the reference ran them, so a model's state follows the same
        path."""
        if index not in self._fp64:
            runs = self.float64_runs(self.spec.input_sets)
            self._fp64.update(enumerate(runs if isinstance(runs, list) else [runs] * len(self.spec.input_sets)))
        return self._fp64[index]

    def float64_runs(self, input_sets: list[InputSet]):
        """Eager outputs for each input set, in float64, by one fresh copy of the model; the exception where
        the model refuses."""
        try:
            return self.first_calls([one.in_float64() for one in input_sets], make=lambda: (
                self.spec.reference_copy() if self.spec.pristine else copy.deepcopy(self.spec.model)).double())
        except Exception as exc:
            return exc.with_traceback(None)  # the reason is kept, not its frames

    def float64(self, input_set: InputSet):
        """Eager outputs for any input set (a slice of one, a batch of samples) computed in float64 by a
        fresh copy of the model, or the exception where the model refuses."""
        runs = self.float64_runs([input_set])
        return runs[0] if isinstance(runs, list) else runs

    @property
    def reduced(self) -> torch.dtype | None:
        """The precision --dtype cast the model to (float16, bfloat16), or None for the model as given."""
        return self.spec.dtype

    def float32(self, index: int):
        """With --dtype: eager's outputs for input set `index` with the model in float32, the answers the
        model moved away from; the exception where it raises."""
        if index not in self._float32:
            started = time.perf_counter()  # the copy counts: each run of the precision search makes one
            try:
                if self._float32_model is None or self.kept:  # one copy for every input set, as the reference has
                    self._float32_model = self.spec.float32_model()
                reseed(SEEDS[0])
                self._float32[index] = self.eager(self.spec.float32_inputs[index].copy(), self._float32_model)
                self.float32_seconds += time.perf_counter() - started
            except Exception as exc:
                self._float32[index] = exc.with_traceback(None)
        return self._float32[index]

    @property
    def sample(self) -> InputSet:
        """The input set artifacts are traced or exported from: the first, unless a recipe says another."""
        return self.spec.input_sets[self.recipe.sample if self.recipe else 0]

    @property
    def keywords(self) -> dict:
        """The recipe's extra keywords for the stage's call."""
        return dict(self.recipe.keywords) if self.recipe else {}

    def artifact(self, filename: str) -> Path:
        path = (self.artifact_dir or self.workdir) / filename
        path.parent.mkdir(parents=True, exist_ok=True)
        return path


def bound(ctx: StageContext) -> dict:
    """What a stage's call reads by name: the model; the sample (input set 1, or a recipe's) as args and
    kwargs, and as keywords alone (for an API that takes one or the other); the dynamic shapes."""
    sample = ctx.sample
    return {"model": ctx.spec.model, "args": sample.args, "kwargs": sample.kwargs or None,
            "keywords": keywords_of(ctx, sample), "dynamic_shapes": ctx.spec.dynamic_shapes}


def keywords_of(ctx: StageContext, sample: InputSet) -> dict:
    """`sample`'s call as keywords alone, where it mixes positional and keyword arguments; its kwargs otherwise."""
    return (sample.as_keywords(ctx.spec.signature) if sample.args and sample.kwargs else None) or sample.kwargs


def reproduced(call: StageCall, after: str, **files: str) -> str:
    """A reproducer's lines for `call`: each name it reads bound as the run bound it, each file (a name:
    its file beside the script), the call under no_grad, then `after`."""
    lines = [f"{name} = case.bound[{name!r}]" for name in call.reads() if name != "model" and name not in files]
    lines += [f"{name} = os.path.join(HERE, {filename!r})" for name, filename in files.items()]
    return "\n".join([*lines, "with torch.no_grad():", textwrap.indent(call.source(), "    "), after])


def _require_an_output(outputs: list) -> None:
    """An output with no tensor or number in it is nothing to export or serve, one nested deeper than pytree
    can walk nothing to compare: a model-file error, not a verdict."""
    for index, output in enumerate(outputs, 1):
        refuse_deep(output, f"forward()'s output for input set {index}")
        if not any(isinstance(leaf, (torch.Tensor, int, float)) and not isinstance(leaf, bool)
                   for _, leaf in flatten(output)[0]):
            raise UsageError(f"forward() returned {reprlib.repr(output)} for input set {index}, with no tensor "
                             "or number in it: there is nothing to compare or deploy")


def _every_set(per_set) -> list[set[int]]:
    """A leaf that changes in one input set changes by design in every one: one draw may agree by chance."""
    found = list(per_set)
    union = set().union(*found)
    return [set(union) for _ in found]


def changed(a, b) -> set[int]:
    """The indices of the leaves (compare.flatten's order) whose values differ between two outputs of the
    same structure; every index where the structures differ."""
    pairs_a, _ = flatten(a)
    pairs_b, _ = flatten(b)
    if [n for n, _ in pairs_a] != [n for n, _ in pairs_b]:
        return set(range(max(len(pairs_a), len(pairs_b))))
    return {index for index, ((_, x), (_, y)) in enumerate(zip(pairs_a, pairs_b)) if not identical(x, y)}


def identical(a, b) -> bool:
    """Two outputs hold the same structure and the same values, NaN included: tensors by torch.equal,
    objects by the tensors they hold (compare.flatten), never by their own `==`."""
    pairs_a, spec_a = flatten(a)
    pairs_b, spec_b = flatten(b)
    if spec_a != spec_b or [n for n, _ in pairs_a] != [n for n, _ in pairs_b]:
        return False
    for (_, x), (_, y) in zip(pairs_a, pairs_b):
        x_t, y_t = to_tensor(x), to_tensor(y)
        if x_t is not None and y_t is not None:
            if x_t.shape != y_t.shape or x_t.dtype != y_t.dtype or not torch.equal(x_t.nan_to_num(), y_t.nan_to_num()):
                return False
        elif type(x) is not type(y) or (isinstance(x, VALUES) and x != y):
            return False
    return True
