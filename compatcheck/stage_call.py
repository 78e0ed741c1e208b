"""The call a stage makes to build its artifact, as one value: the stage runs it, a recipe shows it and
the reproducer writes it, so the three cannot drift apart.

A call is one or more steps (`program = torch.export.export(...)`, then `torch.onnx.export(program, ...)`).
An argument is a literal, or a Name the caller binds: `model`, `args`, `kwargs`, `dynamic_shapes`, or a
step's result. Each literal keyword that an option set says which option (`shaped_by`), so a test can
hold every one of them to the cache key. Imports nothing heavy: the function is looked up when run.
"""

from __future__ import annotations

import importlib
from dataclasses import dataclass


@dataclass(frozen=True)
class Name:
    """A value bound where the call runs, spelled by its name in the source."""

    name: str

    def __repr__(self) -> str:
        return self.name


@dataclass(frozen=True)
class Step:
    function: str  # dotted: "torch.onnx.export", or a name the caller binds
    args: tuple = ()
    keywords: tuple[tuple[str, object], ...] = ()
    result: str | None = None  # the name the step's value is bound to, for the steps after it
    shaped_by: tuple[tuple[str, str], ...] = ()  # (keyword, the option whose value it is)

    def source(self) -> str:
        parts = [repr(arg) for arg in self.args] + [f"{name}={value!r}" for name, value in self.keywords]
        call = f"{self.function}({', '.join(parts)})"
        return f"{self.result} = {call}" if self.result else call

    def run(self, bound: dict):
        # A class the caller binds (a wrapper of its own) is called by its name, as the source spells it.
        function = bound[self.function] if self.function in bound else _resolve(self.function)
        value = (lambda one: bound[one.name] if isinstance(one, Name) else one)
        return function(*map(value, self.args), **{name: value(one) for name, one in self.keywords})


@dataclass(frozen=True)
class StageCall:
    steps: tuple[Step, ...]
    comment: str | None = None  # what a Name stands for, where the source cannot say it

    def source(self) -> str:
        lines = [step.source() for step in self.steps]
        return "\n".join(([f"# {self.comment}"] if self.comment else []) + lines)

    def run(self, **bound):
        """Run every step with `bound` (model, args, ...); the last step's value."""
        bound = dict(bound)
        value = None
        for step in self.steps:
            value = step.run(bound)
            if step.result:
                bound[step.result] = value
        return value

    def reads(self) -> list[str]:
        """The names the call reads that no step of its own binds, in order."""
        found, made = [], set()
        for one in self.steps:
            for value in [*one.args, *(value for _, value in one.keywords)]:
                if isinstance(value, Name) and value.name not in made and value.name not in found:
                    found.append(value.name)
            if one.result:
                made.add(one.result)
        return found

    def shaped_by(self) -> dict[str, str]:
        """Each keyword an option set, and that option."""
        return {keyword: option for step in self.steps for keyword, option in step.shaped_by}


@dataclass(frozen=True)
class Shaped:
    """A keyword's value that an option gave."""

    value: object
    option: str


MODEL, ARGS, KWARGS, DYNAMIC_SHAPES, PATH = map(Name, ("model", "args", "kwargs", "dynamic_shapes", "path"))


def step(function: str, *args, result: str | None = None, **keywords) -> Step:
    """A step whose keywords are values, or Shaped values an option gave (left out where the option
    is unset: the API's default)."""
    pairs, shaped = [], []
    for name, one in keywords.items():
        if isinstance(one, Shaped) and one.value is None:
            continue
        if isinstance(one, Shaped):
            pairs.append((name, one.value))
            shaped.append((name, one.option))
        else:
            pairs.append((name, one))
    return Step(function, tuple(args), tuple(pairs), result, tuple(shaped))


def _resolve(dotted: str):
    """torch.onnx.export -> the function: the longest importable module, then attributes."""
    parts = dotted.split(".")
    for cut in range(len(parts) - 1, 0, -1):
        try:
            found = importlib.import_module(".".join(parts[:cut]))
        except ImportError:
            continue
        for part in parts[cut:]:
            found = getattr(found, part)
        return found
    raise ImportError(dotted)
