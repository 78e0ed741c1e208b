"""The one interface every stage implements, and the context the worker hands it.

A stage builds a runner (a callable taking one InputSet and returning outputs); the harness
calls it on every input set, compares, times and collects findings the same way for all.
"""

from __future__ import annotations

import copy
import reprlib
import warnings
from pathlib import Path
from typing import Callable

import torch

from compatcheck.compare import Tolerances, flatten
from compatcheck.errors import UsageError
from compatcheck.options import RunOptions
from compatcheck.report.model import Finding
from compatcheck.spec import InputSet, ModelSpec
from compatcheck.torch_features import Feature

Runner = Callable[[InputSet], object]


class Stage:
    name: str = ""
    flat_outputs = False  # outputs come back as a flat list of leaves (ONNX), not eager's structure

    def needs(self, ctx: "StageContext") -> tuple[Feature, ...]:
        """The torch features the stage uses with these options (see torch_features.py)."""
        return ()

    def available(self, ctx: "StageContext") -> str | None:
        """None when the stage can run here, else the reason it cannot (a missing optional package)."""
        return None

    def build(self, ctx: "StageContext") -> Runner | None:
        """Build the artifact; return its runner, or None when the stage produces nothing to run."""
        raise NotImplementedError

    def timed_runners(self, runner: Runner) -> dict[str, Runner]:
        """What --bench times, by label: the runner itself unless a stage serves several ways."""
        return {self.name: runner}

    def diagnose(self, ctx: "StageContext", error: BaseException | None) -> list[Finding]:
        """Findings from what the stage saw: the error if it failed, warnings, the artifact."""
        return []

    def backend(self, ctx: "StageContext") -> str | None:
        return None

    def reproduce(self, ctx: "StageContext") -> str:
        """Python lines that, after the common prelude (model, inputs), rebuild this stage's artifact."""
        return ""

    def close(self) -> None:
        """Release what build() holds (servers, sessions); called whatever happened."""


class StageContext:
    """What stages share in one worker: the model, inputs, options, artifacts and the eager reference."""

    def __init__(self, spec: ModelSpec, options: RunOptions, workdir: Path, artifacts: dict[str, str],
                 previous: dict[str, str], blockers: dict[str, str] | None = None):
        self.spec = spec
        self.options = options
        self.workdir = workdir
        self.artifacts = artifacts
        self.previous = previous  # stage name -> status, for skip reasons
        self.blockers = dict(blockers or {})  # stage name -> its first finding in words, for skip reasons
        self.warnings: list[tuple[warnings.WarningMessage, list]] = []
        self.input_results: list = []  # the current stage's InputSetResults, for its diagnosis
        self.stage_seconds = 0.0  # how long the current stage took to build and run, for diagnosis budgets
        self._reference: list | None = None
        self._noise: list | None = None
        self.mutated_inputs: list[int] = []  # input sets whose tensors forward changed in place
        self._fp64: dict[int, object] = {}

    @property
    def tolerances(self) -> Tolerances:
        """What every comparison of this run uses: --atol/--rtol over the model file's TOLERANCE."""
        return Tolerances(self.options.atol, self.options.rtol, self.spec.tolerance)

    def eager(self, input_set: InputSet):
        with torch.no_grad():
            return self.spec.model(*input_set.args, **input_set.kwargs)

    def _compute_reference(self) -> None:
        torch.manual_seed(0)
        runs = self.spec.input_sets
        first = [self.eager(s) for s in runs]
        # A fresh tensor starts at version 0; every in-place write, through any view, bumps it.
        self.mutated_inputs = [i for i, s in enumerate(runs) if any(t._version for t in s.leaves())]
        _require_a_tensor(first)
        torch.manual_seed(0)
        second = [self.eager(s) for s in self.spec.input_sets]
        self._reference = first
        self._noise = None if all(_identical(a, b) for a, b in zip(first, second)) else second

    @property
    def reference(self) -> list:
        """Eager outputs per input set (raises what the model raises)."""
        if self._reference is None:
            self._compute_reference()
        return self._reference

    @property
    def noise(self) -> list | None:
        """A second eager run per input set when it differs from the first, else None."""
        self.reference
        return self._noise

    def fp64(self, index: int):
        """Eager outputs for input set `index` computed in float64, or None where the model refuses."""
        if index not in self._fp64:
            try:
                model = copy.deepcopy(self.spec.model).double()
                as64 = self.spec.input_sets[index].map(
                    lambda t: t.double() if t.is_floating_point() else t
                )
                with torch.no_grad():
                    self._fp64[index] = model(*as64.args, **as64.kwargs)
            except Exception:
                self._fp64[index] = None
        return self._fp64[index]

    def artifact(self, filename: str) -> Path:
        path = self.workdir / filename
        path.parent.mkdir(parents=True, exist_ok=True)
        return path


def _require_a_tensor(outputs: list) -> None:
    """An output with no tensor in it is nothing to export or serve: a model-file error, not a verdict."""
    for index, output in enumerate(outputs, 1):
        if not any(isinstance(leaf, torch.Tensor) for _, leaf in flatten(output)[0]):
            raise UsageError(f"forward() returned {reprlib.repr(output)} for input set {index}, with no tensor "
                             "in it: there is nothing to compare or deploy")


def _identical(a, b) -> bool:
    from torch.utils import _pytree as pytree

    leaves_a, spec_a = pytree.tree_flatten(a)
    leaves_b, spec_b = pytree.tree_flatten(b)
    if spec_a != spec_b:
        return False
    for x, y in zip(leaves_a, leaves_b):
        if isinstance(x, torch.Tensor) and isinstance(y, torch.Tensor):
            if x.shape != y.shape or not torch.equal(x.nan_to_num(), y.nan_to_num()):
                return False
        elif x != y:
            return False
    return True
