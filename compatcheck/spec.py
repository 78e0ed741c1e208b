"""Load the user's model (worker side only) into a ModelSpec, with one-line errors for bad input.

A model file's protocol: `get_model()` (or the factory named after ':'), `get_inputs()` returning an
input set or a list of input sets, optional `get_dynamic_shapes()` and `TOLERANCE`. A model handed
to `compatcheck.check()` as an object arrives with the same parts (see payload.py).
"""

from __future__ import annotations

import hashlib
import importlib.util
import math
import sys
import traceback
from dataclasses import dataclass, field
from pathlib import Path

import torch
from torch.utils import _pytree as pytree

from compatcheck.errors import UsageError
from compatcheck.frames import UserCode
from compatcheck.target import check_model_path

SEED = 0


@dataclass
class InputSet:
    """One call of the model: positional args or keyword args (never both)."""

    args: tuple = ()
    kwargs: dict = field(default_factory=dict)

    def leaves(self) -> list[torch.Tensor]:
        return pytree.tree_leaves((self.args, self.kwargs))

    def map(self, fn) -> "InputSet":
        return InputSet(*pytree.tree_map(fn, (self.args, self.kwargs)))

    def copy(self) -> "InputSet":
        """Fresh tensors with the same values: what one run may change in place stays in that run."""
        return self.map(lambda t: t.detach().clone().requires_grad_(t.requires_grad))

    def arrays_for(self, names: list[str], model: str, why: str = "") -> list:
        """The tensors as numpy arrays in the order of `model`'s input `names`: by name for keyword
        inputs, else by position. `model` and `why` word the error when the counts differ."""
        if self.kwargs and set(names) <= set(self.kwargs):
            leaves = [self.kwargs[name] for name in names]
        else:
            leaves = self.leaves()
            if len(leaves) != len(names):
                raise ValueError(f"{model} takes {len(names)} inputs ({', '.join(names)}) "
                                 f"but the input set has {len(leaves)} tensors{why}")
        return [leaf.detach().cpu().numpy() for leaf in leaves]

    def describe(self) -> str:
        return ", ".join("x".join(map(str, t.shape)) or "scalar" for t in self.leaves())


@dataclass
class ModelSpec:
    path: Path  # the model file, or the file defining an object's class
    factory: str  # the factory function, or an object's class name
    model: torch.nn.Module
    given_inputs: list[InputSet]  # as get_inputs() made them; never handed to a run
    dynamic_shapes: object | None
    dynamic_shapes_inferred: bool
    tolerance: dict
    user: UserCode
    arrived_training: bool
    build_sites: dict[int, traceback.FrameSummary]
    is_object: bool = False  # handed over as an object, not built by a factory in a model file

    @property
    def input_sets(self) -> list[InputSet]:
        """A fresh copy of every input set on each access, so a model that changes its input in place
        cannot change what the next run, stage or comparison sees."""
        return [one.copy() for one in self.given_inputs]


def _where(user: UserCode, exc: BaseException) -> str:
    frame = user.from_exception(exc)
    return f" at {user.display(frame.filename)}:{frame.lineno}" if frame else ""


def _raised(exc: BaseException) -> str:
    """What the model file did, in words: sys.exit() and Ctrl-C are calls, not errors."""
    if isinstance(exc, SystemExit):
        return f"called sys.exit({'' if exc.code is None else repr(exc.code)})"
    text = str(exc).strip().splitlines()
    return f"raised {type(exc).__name__}" + (f": {text[0]}" if text else "")


def _call(user: UserCode, fn, what: str):
    # BaseException: sys.exit() or KeyboardInterrupt in the model file is its error, not the worker's.
    try:
        return fn()
    except BaseException as exc:
        raise UsageError(f"{what} {_raised(exc)}{_where(user, exc)}") from None


def module_name(path: Path) -> str:
    """The name the model is registered under in sys.modules: the same in every process (a reproducer's
    too), since pickling, torch.export and TorchScript look classes up by it."""
    return f"compatcheck_model_{hashlib.sha256(str(path).encode()).hexdigest()[:16]}"


def _import(path: Path, user: UserCode):
    name = module_name(path)
    module_spec = importlib.util.spec_from_file_location(name, path)
    module = importlib.util.module_from_spec(module_spec)
    sys.modules[name] = module
    sys.path.insert(0, str(path.parent))
    try:
        module_spec.loader.exec_module(module)
    except SyntaxError as exc:
        # Undecodable or NUL-laden files raise it with no filename or line.
        where = user.display(exc.filename) if exc.filename and exc.filename != "<unknown>" else path.name
        line = f":{exc.lineno}" if exc.lineno else ""
        raise UsageError(f"syntax error in {where}{line}: {exc.msg}") from None
    except BaseException as exc:
        raise UsageError(f"importing {path.name} {_raised(exc)}{_where(user, exc)}") from None
    return module


def _build_recording_sites(user: UserCode, factory):
    """Call the factory while remembering where in the user's code each module was constructed."""
    sites: dict[int, traceback.FrameSummary] = {}
    original = torch.nn.Module.__init__

    def recording_init(self, *args, **kwargs):
        original(self, *args, **kwargs)
        if id(self) not in sites:
            frame = user.innermost(traceback.extract_stack()[:-1])
            if frame is not None:
                sites[id(self)] = frame

    torch.nn.Module.__init__ = recording_init
    try:
        return factory(), sites
    finally:
        torch.nn.Module.__init__ = original


def normalize_inputs(raw, where: str) -> list[InputSet]:
    if raw is None:
        raise UsageError(f"{where} returned None; expected a tensor, a tuple, a dict or a list of input sets")
    items = raw if isinstance(raw, list) else [raw]
    if not items:
        raise UsageError(f"{where} returned an empty list; expected at least one input set")
    sets = []
    for index, item in enumerate(items, 1):
        if isinstance(item, torch.Tensor):
            one = InputSet(args=(item,))
        elif isinstance(item, tuple):
            one = InputSet(args=item)
        elif isinstance(item, dict):
            one = InputSet(kwargs=item)
        else:
            raise UsageError(
                f"{where}: input set {index} is {type(item).__name__}; expected a tensor, a tuple or a dict"
            )
        leaves, _ = pytree.tree_flatten_with_path((one.args, one.kwargs))
        if not leaves:
            raise UsageError(f"{where}: input set {index} holds no tensors")
        for key_path, leaf in leaves:
            if not isinstance(leaf, torch.Tensor):
                raise UsageError(
                    f"{where}: input set {index}, input {pytree.keystr(key_path)} is "
                    f"{type(leaf).__name__}; every input must be a tensor"
                )
        sets.append(one)
    first = pytree.tree_structure((sets[0].args, sets[0].kwargs))
    for index, one in enumerate(sets[1:], 2):
        if pytree.tree_structure((one.args, one.kwargs)) != first:
            raise UsageError(f"{where}: input set {index} {_difference(one, sets[0])}")
    return sets


def _inputs_named(one: InputSet) -> list[str]:
    """Each tensor of an input set by where it goes: args[0], args[1][2], x, x['mask']..."""
    names = [f"args{pytree.keystr(path)}" for path, _ in pytree.tree_flatten_with_path(one.args)[0]]
    for name, value in one.kwargs.items():
        names += [f"{name}{pytree.keystr(path)}" for path, _ in pytree.tree_flatten_with_path(value)[0]]
    return names


def _listed(names: list[str]) -> str:
    shown = ", ".join(names[:6]) + (", ..." if len(names) > 6 else "")
    return f"{len(names)} input{'' if len(names) == 1 else 's'} ({shown})"


def _difference(one: InputSet, first: InputSet) -> str:
    """How an input set's structure differs from input set 1, in words."""
    mine, theirs = _inputs_named(one), _inputs_named(first)
    if mine != theirs:
        return f"has {_listed(mine)}, input set 1 has {_listed(theirs)}"
    mine, theirs = _containers(one), _containers(first)
    where = next((name for name in theirs if mine.get(name) != theirs[name]), "")
    return (f"holds the same inputs in other containers: a {mine.get(where, 'different container')} at {where} "
            f"where input set 1 has a {theirs.get(where)}")


def _containers(one: InputSet) -> dict[str, str]:
    """The container type at each place of an input set: {'args[0]': 'list', 'x': 'dict', ...}."""
    found: dict[str, str] = {}

    def walk(value, name):
        if isinstance(value, (list, tuple, dict)):
            found[name] = type(value).__name__
            for key, item in value.items() if isinstance(value, dict) else enumerate(value):
                walk(item, f"{name}[{key!r}]")

    for index, value in enumerate(one.args):
        walk(value, f"args[{index}]")
    for key, value in one.kwargs.items():
        walk(value, key)
    return found


def infer_dynamic_shapes(sets: list[InputSet]):
    """Mark every dimension that differs between input sets as dynamic, in torch.export form.

    Returns None when all sets share every shape. Uses Dim.DYNAMIC, so an export that would
    silently specialize such a dimension fails instead, with the reason.
    """
    from compatcheck.torch_features import dynamic_dim

    shapes = [[tuple(t.shape) for t in s.leaves()] for s in sets]
    first = shapes[0]
    specs = []
    any_dynamic = False
    for leaf_index, shape in enumerate(first):
        for other_index, other in enumerate(shapes[1:], 2):
            if len(other[leaf_index]) != len(shape):
                raise UsageError(
                    f"input set {other_index}: input {leaf_index} has {len(other[leaf_index])} dimensions, "
                    f"input set 1 has {len(shape)}"
                )
        dims = {d: dynamic_dim(f"input{leaf_index}_dim{d}") for d in range(len(shape))
                if any(o[leaf_index][d] != shape[d] for o in shapes)}
        any_dynamic |= bool(dims)
        specs.append(dims or None)
    if not any_dynamic:
        return None
    spec = pytree.tree_unflatten(specs, pytree.tree_structure((sets[0].args, sets[0].kwargs)))
    args_spec, kwargs_spec = spec
    return kwargs_spec if sets[0].kwargs else tuple(args_spec)


def dynamic_dims(spec: "ModelSpec") -> list[set[int]]:
    """The dimensions declared dynamic, per input leaf (in InputSet.leaves() order)."""
    first = spec.input_sets[0]
    leaves = first.leaves()
    shapes = spec.dynamic_shapes
    if shapes is None:
        return [set() for _ in leaves]
    tree = {k: shapes.get(k) for k in first.kwargs} if first.kwargs else tuple(
        shapes.values() if isinstance(shapes, dict) else shapes)
    # A per-tensor spec is None or a dict keyed by dimension index.
    specs = pytree.tree_leaves(
        tree, is_leaf=lambda x: x is None or (isinstance(x, dict) and all(isinstance(k, int) for k in x))
    )
    if len(specs) != len(leaves):
        return [set() for _ in leaves]
    return [set(spec or {}) for spec in specs]


def describe_dynamic_shapes(dynamic_shapes) -> str | None:
    if dynamic_shapes is None:
        return None
    return repr(dynamic_shapes).replace("DimHint(DYNAMIC)", "DYNAMIC").replace("DimHint(AUTO)", "AUTO")


def _check_tolerance(raw, where: str) -> dict:
    if raw is None:
        return {}
    if not isinstance(raw, dict):
        raise UsageError(f"{where} must be a dict like {{'atol': 1e-4, 'rtol': 1e-3}}")
    for key, value in raw.items():
        if isinstance(value, dict):
            _check_tolerance(value, f"{where}[{key!r}]")
        elif key not in ("atol", "rtol"):
            raise UsageError(f"{where}: unknown key {key!r}; use atol, rtol or an output name mapping to those")
        elif isinstance(value, bool) or not isinstance(value, (int, float)) or not math.isfinite(value) or value < 0:
            # nan compares false with everything and inf accepts anything: either would pass any mismatch
            raise UsageError(f"{where}[{key!r}] must be a finite non-negative number, got {value!r}")
    return raw


def load(path: Path, factory: str = "get_model") -> ModelSpec:
    path = Path(path).resolve()
    check_model_path(path)
    user = UserCode(path)
    module = _import(path, user)
    shown = user.display(str(path))

    make = getattr(module, factory, None)
    if not callable(make):
        raise UsageError(f"{shown} defines no function {factory}()")
    get_inputs = getattr(module, "get_inputs", None)
    if not callable(get_inputs):
        raise UsageError(f"{shown} defines no function get_inputs()")

    torch.manual_seed(SEED)
    model, sites = _call(user, lambda: _build_recording_sites(user, make), f"{factory}()")
    if not isinstance(model, torch.nn.Module):
        raise UsageError(f"{factory}() returned {type(model).__name__}; expected a torch.nn.Module")
    torch.manual_seed(SEED)
    raw_inputs = _call(user, get_inputs, "get_inputs()")
    get_dynamic = getattr(module, "get_dynamic_shapes", None)
    dynamic = _call(user, get_dynamic, "get_dynamic_shapes()") if callable(get_dynamic) else INFER
    spec = assemble(path, factory, model, raw_inputs, "get_inputs()", dynamic,
                    getattr(module, "TOLERANCE", None), "TOLERANCE")
    spec.build_sites = sites
    return spec


INFER = "infer"  # dynamic shapes not given: every dimension that differs between input sets is dynamic


def assemble(path: Path, factory: str, model, raw_inputs, inputs_from: str, dynamic_shapes, tolerance,
             tolerance_from: str, *, is_object: bool = False) -> ModelSpec:
    """A ModelSpec from the parts, checked; `*_from` name where a bad part came from in errors."""
    if not isinstance(model, torch.nn.Module):
        raise UsageError(f"the model is {type(model).__name__}; expected a torch.nn.Module")
    sets = normalize_inputs(raw_inputs, inputs_from)
    inferred = isinstance(dynamic_shapes, str) and dynamic_shapes == INFER
    if inferred:
        dynamic_shapes = infer_dynamic_shapes(sets)
    arrived_training = model.training
    model.eval()
    return ModelSpec(
        path=Path(path),
        factory=factory,
        model=model,
        given_inputs=sets,
        dynamic_shapes=dynamic_shapes,
        dynamic_shapes_inferred=inferred and dynamic_shapes is not None,
        tolerance=_check_tolerance(tolerance, tolerance_from),
        user=UserCode(Path(path)),
        arrived_training=arrived_training,
        build_sites={},
        is_object=is_object,
    )
