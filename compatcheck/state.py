"""State kept across calls: what forward changes that its next call reads.

A forward may bump a counter on the module, update a buffer, append to a list it holds, or change a
global of the model file or of a module beside it. Then eager's second call answers otherwise than its
first, while an exported or traced artifact answers like the call it was built from. The state is
taken before and after eager's first call: the module's Python attributes (every submodule's, by
qualified name), its buffers by value, what lists and dicts hold; and the globals of the model's own
files. What changed can be put back (`rewind`), so every call compared is a first call.
"""

from __future__ import annotations

import copy
import sys
import types
from dataclasses import dataclass
from pathlib import Path

import numpy
import torch

from compatcheck.frames import UserCode

# What every nn.Module keeps for itself (hooks, the registries of parameters, buffers and submodules).
_MODULE_OWN = frozenset(vars(torch.nn.Module()))
_SKIPPED = (types.ModuleType, types.FunctionType, types.BuiltinFunctionType, type, torch.nn.Module)
_DEPTH = 4  # how deep lists, dicts and plain objects are followed
MISSING = object()


@dataclass(frozen=True)
class Place:
    """One piece of state: an attribute or buffer of a submodule, or a global of a module."""

    kind: str  # "attribute", "buffer", "global"
    owner: str  # the submodule's qualified name ('' for the model), or the module's name
    attribute: str
    shown: str  # 'blocks.1.count', 'mean', 'global_step.STEP'

    def read(self, model, modules: dict):
        owner = modules.get(self.owner) if self.kind == "global" else _submodule(model, self.owner)
        if owner is None:
            return MISSING
        return vars(owner).get(self.attribute, MISSING) if self.kind == "global" else getattr(owner, self.attribute,
                                                                                              MISSING)


def _submodule(model, path: str):
    try:
        return model.get_submodule(path)
    except AttributeError:
        return None


def own_modules(user: UserCode) -> dict[str, types.ModuleType]:
    """The modules of the model's own folder (the model file among them), by name."""
    return {name: module for name, module in list(sys.modules.items())
            if user.in_folder(getattr(module, "__file__", None))}


def model_places(model) -> list[Place]:
    """Every Python attribute and buffer of the model and its submodules."""
    found = []
    for path, module in model.named_modules():
        found += [Place("attribute", path, name, f"{path}.{name}" if path else name) for name in vars(module)
                  if name not in _MODULE_OWN]
        found += [Place("buffer", path, name, f"{path}.{name}" if path else name)
                  for name, _ in module.named_buffers(recurse=False)]
    return found


def global_places(modules: dict) -> list[Place]:
    """The globals of the model's own modules that hold values (not modules, functions or classes)."""
    found = []
    for module_name, module in modules.items():
        stem = Path(module.__file__).stem if module_name.startswith("compatcheck_model_") else module_name
        found += [Place("global", module_name, name, f"{stem}.{name}") for name, value in vars(module).items()
                  if not name.startswith("__") and not isinstance(value, _SKIPPED)]
    return found


def fingerprint(value, quick: bool = False, depth: int = 0):
    """A value's state, comparable with `same`: tensors by value (`quick`: by identity and version, which
    every in-place write bumps), lists, tuples, dicts and plain objects by what they hold, anything else
    by identity."""
    if isinstance(value, numpy.ndarray):  # what onnxruntime answers
        value = torch.from_numpy(value.copy())
    if isinstance(value, torch.Tensor):
        return ("tensor", id(value), value._version) if quick else ("tensor", value.detach().cpu().clone())
    if value is None or isinstance(value, (bool, int, float, complex, str, bytes)):
        return value
    if depth >= _DEPTH:
        return ("object", id(value))
    if isinstance(value, (list, tuple)):
        return (type(value).__name__, [fingerprint(v, quick, depth + 1) for v in value])
    if isinstance(value, dict):
        return ("dict", [(repr(k), fingerprint(v, quick, depth + 1)) for k, v in value.items()])
    if isinstance(value, (set, frozenset)):
        return ("set", sorted(repr(v) for v in value))
    if hasattr(value, "__dict__") and not isinstance(value, _SKIPPED):
        return ("object", id(value), fingerprint(dict(vars(value)), quick, depth + 1))
    return ("object", id(value))


def same(a, b) -> bool:
    if isinstance(a, torch.Tensor) or isinstance(b, torch.Tensor):
        return isinstance(a, torch.Tensor) and isinstance(b, torch.Tensor) and a.shape == b.shape and \
            a.dtype == b.dtype and torch.equal(a.nan_to_num(), b.nan_to_num())
    if isinstance(a, (list, tuple)) and isinstance(b, (list, tuple)):
        return type(a) is type(b) and len(a) == len(b) and all(same(x, y) for x, y in zip(a, b))
    return type(a) is type(b) and a == b


def taken(model, modules: dict, chosen: list[Place], quick: bool = False) -> list:
    return [fingerprint(place.read(model, modules), quick) for place in chosen]


def changed(chosen: list[Place], before: list, after: list) -> list[Place]:
    """The places whose state differs between two takes."""
    return [place for place, a, b in zip(chosen, before, after) if not same(a, b)]


class Globals:
    """The globals of the model's own modules as they were before any call, to put back what forward
    changed: in place for a list, dict or set still held (a module that imported it by name holds it
    too), else by assigning it again."""

    def __init__(self, user: UserCode):
        self.modules = own_modules(user)
        self.places = global_places(self.modules)
        self.first = taken(None, self.modules, self.places)
        self.values = {place: _copied(place.read(None, self.modules)) for place in self.places}
        self.kept: list[Place] = []  # the globals found changed by a call: put back with every copy

    def changed(self) -> list[Place]:
        return changed(self.places, self.first, taken(None, self.modules, self.places))

    def rewind(self) -> None:
        for place in self.kept:
            value = self.values.get(place, MISSING)
            module = self.modules[place.owner]
            if value is MISSING:
                vars(module).pop(place.attribute, None)
            else:
                setattr(module, place.attribute, _put_back(vars(module).get(place.attribute), value))


def _copied(value):
    try:
        return copy.deepcopy(value)
    except Exception:  # what cannot be copied is put back as the object it was
        return value


def _put_back(held, value):
    """`value` (a copy of the first state) into `held` in place where both are the same kind of container."""
    fresh = _copied(value)
    if type(held) is type(fresh) and isinstance(held, (list, dict, set)):
        held.clear()
        (held.extend if isinstance(held, list) else held.update)(fresh)
        return held
    return fresh


def rewind_model(model: torch.nn.Module, pristine: torch.nn.Module, kept: list[Place]) -> None:
    """Put the model's kept attributes and buffers back as `pristine` has them: buffers in place, so an
    artifact that shares them (torch.export's module) starts again too."""
    for place in kept:
        if place.kind == "global":
            continue
        owner, first = _submodule(model, place.owner), place.read(pristine, {})
        if owner is None:
            continue
        held = getattr(owner, place.attribute, None)
        if place.kind == "buffer" and isinstance(held, torch.Tensor) and held.shape == first.shape:
            with torch.no_grad():
                held.copy_(first)
        elif first is MISSING:
            vars(owner).pop(place.attribute, None)
        else:
            setattr(owner, place.attribute, _put_back(vars(owner).get(place.attribute), first))


def rewinding(runner):
    """`runner` with the buffers of the modules it holds (an exported or loaded module) put back before each
    call as they were when it was built: each call of an artifact that keeps state is then a first call."""
    held = [cell.cell_contents for cell in getattr(runner, "__closure__", None) or ()
            if isinstance(getattr(cell, "cell_contents", None), torch.nn.Module)]
    built = [(buffer, buffer.detach().clone()) for module in held for buffer in module.buffers()]

    def first_call(input_set):
        with torch.no_grad():
            for buffer, value in built:
                buffer.copy_(value)
        return runner(input_set)

    first_call.raw = runner  # called twice in a row, it shows whether the artifact kept the state
    return first_call
