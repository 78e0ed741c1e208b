"""Load the user's model (worker side only) into a ModelSpec, with one-line errors for bad input.

A model file's protocol: `get_model()` (or the factory named after ':'), `get_inputs()` returning an
input set or a list of input sets, optional `get_dynamic_shapes()`, `TOLERANCE`, `BATCH_DIM` and
`PADDING`. A model handed to `compatcheck.check()` as an object arrives with the same parts (see
payload.py).
"""

from __future__ import annotations

import copy
import hashlib
import importlib.machinery
import importlib.util
import inspect
import linecache
import math
import sys
import traceback
from dataclasses import dataclass, field
from pathlib import Path

import torch
from torch.utils import _pytree as pytree

from compatcheck import snapshot
from compatcheck.errors import UsageError
from compatcheck.frames import UserCode
from compatcheck.lines_run import LinesRun
from compatcheck.nesting import refuse_deep
from compatcheck.state import Globals
from compatcheck.target import check_model_path
from compatcheck.variation import reseed

SEED = 0


# Non-tensor arguments a model may take: constants of every artifact, the same in every input set.
CONSTANTS = (bool, int, float, str)


def _is_tensor(leaf) -> bool:
    return isinstance(leaf, torch.Tensor)


@dataclass
class InputSet:
    """One call of the model: positional args, keyword args, or both (a compatcheck.Call)."""

    args: tuple = ()
    kwargs: dict = field(default_factory=dict)
    names: list[str] | None = None  # per tensor leaf, the forward parameter it is (or is inside), when known

    def leaves(self) -> list[torch.Tensor]:
        """The tensors, in the order the call passes them (positional, then keyword)."""
        return [leaf for leaf in pytree.tree_leaves((self.args, self.kwargs)) if _is_tensor(leaf)]

    def constants(self) -> list[tuple[str, object]]:
        """The non-tensor arguments, by where they go: [('mode', 'fast'), ('args[2]', 3)]."""
        flat, _ = pytree.tree_flatten_with_path((self.args, self.kwargs))
        return [(_place(path), leaf) for path, leaf in flat if not _is_tensor(leaf)]

    def map(self, fn) -> "InputSet":
        """The input set with `fn` applied to every tensor; constants stay as they are."""
        args, kwargs = pytree.tree_map(lambda leaf: fn(leaf) if _is_tensor(leaf) else leaf, (self.args, self.kwargs))
        return InputSet(args, kwargs, self.names)

    def copy(self) -> "InputSet":
        """Fresh tensors with the same values: what one run may change in place stays in that run."""
        return self.map(lambda t: t.detach().clone().requires_grad_(t.requires_grad))

    def in_float64(self) -> "InputSet":
        """The floating tensors in float64 with every other property kept: a forward may branch on
        requires_grad."""
        return self.map(lambda t: t.detach().to(torch.float64).requires_grad_(t.requires_grad)
                        if t.is_floating_point() else t)

    def arrays_for(self, names: list[str], model: str, why: str = "") -> list:
        """The tensors as numpy arrays in the order of `model`'s input `names` (a graph's inputs): by
        parameter name where every name is one, else by position. `model` and `why` word the error when
        the counts differ."""
        leaves = self.leaves()
        by_name = dict(zip(self.names or [], leaves))
        if self.kwargs and not self.args and set(names) <= set(self.kwargs):
            leaves = [self.kwargs[name] for name in names]
        elif by_name and set(names) <= set(by_name):
            leaves = [by_name[name] for name in names]
        elif len(leaves) != len(names):
            raise ValueError(f"{model} takes {len(names)} inputs ({', '.join(names)}) "
                             f"but the input set has {len(leaves)} tensors{why}")
        return [leaf.detach().cpu().numpy() for leaf in leaves]

    def as_keywords(self, signature: inspect.Signature) -> dict | None:
        """Every argument by its parameter name (for tools that take a call as keywords only), or None
        where the signature cannot name them all (*args)."""
        try:
            bound = signature.bind(*self.args, **self.kwargs)
        except TypeError:
            return None
        if any(p.kind is inspect.Parameter.VAR_POSITIONAL and p.name in bound.arguments
               for p in signature.parameters.values()):
            return None
        return dict(bound.arguments)

    def describe(self) -> str:
        return ", ".join("x".join(map(str, t.shape)) or "scalar" for t in self.leaves())


def _place(path) -> str:
    """'args[0]', 'mask' or "x['ids']" for a leaf's pytree path in (args, kwargs)."""
    head, *rest = path
    if head.idx == 0:
        return f"args{pytree.keystr(rest)}"
    name, *inner = rest
    return f"{name.key}{pytree.keystr(inner)}"


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
    build_sites: dict[str, traceback.FrameSummary]  # module name in the model -> where the user built it
    is_object: bool = False  # handed over as an object, not built by a factory in a model file
    pristine: Pristine | None = None
    signature: inspect.Signature | None = None  # of the model's forward, to name its arguments
    dtype: torch.dtype | None = None  # --dtype float16/bfloat16: what the model and its inputs were cast to
    float32_inputs: list[InputSet] | None = None  # with `dtype`: the input sets in float32, for the float32 answers
    padding: dict[str, float] = field(default_factory=dict)  # input name -> the value samples are padded with
    batch_dim: int | dict | None = 0  # BATCH_DIM: the batch's dim of every input, or by input name
    # With `compatcheck fix`: the original model, whose answers every stage of its rewritten copy is held to.
    reference: Pristine | None = None
    covered: LinesRun | None = None  # with `reference`: the lines of the model file its runs executed

    def reference_copy(self) -> torch.nn.Module:
        """A pristine copy of the model eager's answers come from: the model itself, or the original."""
        held = self.reference or self.pristine
        return held.copy() if held else self.model

    @property
    def input_sets(self) -> list[InputSet]:
        """A fresh copy of every input set on each access, so a model that changes its input in place
        cannot change what the next run, stage or comparison sees."""
        return [one.copy() for one in self.given_inputs]

    def float32_model(self) -> torch.nn.Module:
        """A copy of the model in float32, as the model was before --dtype cast it."""
        model = self.pristine.copy(cast=False) if self.pristine else copy.deepcopy(self.model)
        return model.float()

    def place(self, device: str) -> None:
        """Move the model and the input sets to `device`, as a deployer does: model.to(device) and every input
        tensor .to(device). Tensors the model keeps outside its parameters and buffers stay where they are."""
        if device == "cpu":
            return
        for held in (self.pristine, self.reference):
            if held is not None:
                held.device = device
        self.given_inputs = [one.map(lambda t: t.to(device)) for one in self.given_inputs]
        self.model = self.pristine.copy() if self.pristine is not None else self.model.to(device)

    def fresh_model(self) -> torch.nn.Module:
        """The model as the factory built it (in eval mode), for one stage: what an earlier stage did to
        its own copy (a cache it filled, a buffer it wrote, a submodule it swapped) is not there. Also sets
        `self.model`, which the stage then uses."""
        if self.pristine is not None:
            self.model = self.pristine.copy()
        return self.model


class Pristine:
    """The model right after the factory built it: copies for the stages, each proven equal to it.

    A copy is a deepcopy; where the model cannot be deep-copied it is built again by `rebuild` (the
    factory, under the seed it was first built with). Either way its state_dict must equal the first
    one bit for bit, else `problem` says how it differs."""

    def __init__(self, model: torch.nn.Module, rebuild=None):
        self.state = {name: snapshot.take(value) for name, value in model.state_dict().items()}
        self.original, self.rebuild = model, rebuild
        self.problem: str | None = None
        self.dtype: torch.dtype | None = None  # what every copy is cast to (--dtype)
        self.uncopyable: str | None = None
        self.device = "cpu"  # where copies are made to run (ModelSpec.place)
        self.globals: Globals | None = None  # the model's own modules' globals before any call
        try:
            self.model = copy.deepcopy(model)
        except Exception as exc:
            self.model = None
            self.uncopyable = f"{type(exc).__name__}: {exc}"

    def copy(self, cast: bool = True) -> torch.nn.Module:
        """A copy, cast to `dtype` unless `cast` is False; the globals a call was found to change are put
        back as they were before any call, as that copy's own state is."""
        if self.globals is not None:
            self.globals.rewind()
        if self.model is not None:
            made = copy.deepcopy(self.model)
        elif self.rebuild is not None:
            reseed(SEED)
            made = self.rebuild()
        else:  # an object that cannot be deep-copied, handed over with no factory to build it again
            self.problem = f"the model cannot be deep-copied ({self.uncopyable}), so every stage runs on the same object"
            return self.original.to(self.device)
        made.eval()
        self.problem = snapshot.differs(made.state_dict(), self.state)  # on the CPU, where the first state was kept
        made.to(self.device)
        return cast_model(made, self.dtype) if cast and self.dtype else made


REDUCED = {"float16": torch.float16, "bfloat16": torch.bfloat16}  # --dtype's reduced precisions


def cast_model(model: torch.nn.Module, dtype: torch.dtype) -> torch.nn.Module:
    """`model.to(dtype)`, unless some of its floating parameters or buffers are in `dtype` already: then
    its author cast it, and the modules they kept in float32 stay as they are."""
    floating = [t for t in (*model.parameters(), *model.buffers()) if t.is_floating_point()]
    return model if any(t.dtype == dtype for t in floating) else model.to(dtype)


def cast_inputs(sets: list[InputSet], dtype: torch.dtype) -> list[InputSet]:
    """The floating tensors in `dtype`; integer and bool ones (ids, masks) and constants as they are."""
    return [one.map(lambda t: t.to(dtype) if t.is_floating_point() else t) for one in sets]


def cast(spec: ModelSpec, dtype_name: str) -> None:
    """Apply --dtype: every copy of the model a stage gets, and every input set, in that precision; the
    float32 input sets are kept for the float32 answers. float32 leaves the model as given."""
    dtype = REDUCED.get(dtype_name)
    if dtype is None:
        return
    if spec.pristine is None or (spec.pristine.model is None and spec.pristine.rebuild is None):
        raise UsageError(f"--dtype {dtype_name} casts a copy of the model, and this one cannot be deep-copied "
                         f"({spec.pristine.uncopyable if spec.pristine else 'no copy'}): cast it yourself, or make "
                         "it copyable")
    spec.dtype = spec.pristine.dtype = dtype
    if spec.reference is not None:
        spec.reference.dtype = dtype
    spec.float32_inputs = [one.map(lambda t: t.float() if t.is_floating_point() else t) for one in spec.given_inputs]
    spec.given_inputs = cast_inputs(spec.given_inputs, dtype)
    spec.model = spec.pristine.copy()


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


class _Rewritten(importlib.machinery.SourceFileLoader):
    """Loads `text` (a rewritten copy of the model file) as if it were the file at `path`: its `__file__`,
    its frames and the source lines torch reads (dynamo, TorchScript, tracebacks) are the file's."""

    def __init__(self, name: str, path: str, text: str):
        super().__init__(name, path)
        self.text = text
        # An entry without a modification time is never checked against the file on disk.
        linecache.cache[path] = (len(text), None, text.splitlines(keepends=True), path)

    def get_data(self, path: str) -> bytes:
        return self.text.encode() if path == self.path else super().get_data(path)

    def path_stats(self, path: str):
        raise OSError("a rewritten copy has no bytecode cache")  # never read nor write the file's .pyc


def _import(path: Path, user: UserCode, name: str | None = None, text: str | None = None):
    """The model file as a module, registered under its name; `text` is run in its place where given."""
    name = name or module_name(path)
    loader = _Rewritten(name, str(path), text) if text is not None else None
    module_spec = importlib.util.spec_from_file_location(name, path, loader=loader)
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
            caller = sys._getframe(1)
            while caller is not None and caller.f_locals.get("self") is self:  # its own __init__s: super().__init__()
                caller = caller.f_back
            frame = user.innermost(traceback.extract_stack(caller)) if caller is not None else None
            if frame is not None:
                sites[id(self)] = frame

    torch.nn.Module.__init__ = recording_init
    try:
        return factory(), sites
    finally:
        torch.nn.Module.__init__ = original


def normalize_inputs(raw, where: str) -> list[InputSet]:
    from compatcheck.call import Call

    if raw is None:
        raise UsageError(f"{where} returned None; expected a tensor, a tuple, a dict, a compatcheck.Call or a list "
                         "of input sets")
    items = raw if isinstance(raw, list) else [raw]
    if not items:
        raise UsageError(f"{where} returned an empty list; expected at least one input set")
    sets = []
    for index, item in enumerate(items, 1):
        if isinstance(item, torch.Tensor):
            one = InputSet(args=(item,))
        elif isinstance(item, Call):
            one = InputSet(args=tuple(item.args), kwargs=dict(item.kwargs))
        elif isinstance(item, tuple):
            one = InputSet(args=item)
        elif isinstance(item, dict):
            one = InputSet(kwargs=item)
        else:
            raise UsageError(f"{where}: input set {index} is {type(item).__name__}; expected a tensor, a tuple, a "
                             "dict or a compatcheck.Call")
        refuse_deep(item, f"{where}: input set {index}")
        leaves, _ = pytree.tree_flatten_with_path((one.args, one.kwargs))
        if not any(_is_tensor(leaf) for _, leaf in leaves):
            raise UsageError(f"{where}: input set {index} holds no tensors")
        for key_path, leaf in leaves:
            if not isinstance(leaf, (torch.Tensor, *CONSTANTS)):
                raise UsageError(f"{where}: input set {index}, input {_place(key_path)} is {type(leaf).__name__}; an "
                                 "input is a tensor, or a constant argument (a str, int, float, bool or None)")
        sets.append(one)
    first = pytree.tree_structure((sets[0].args, sets[0].kwargs))
    for index, one in enumerate(sets[1:], 2):
        if pytree.tree_structure((one.args, one.kwargs)) != first:
            raise UsageError(f"{where}: input set {index} {_difference(one, sets[0])}")
        for (name, value), (_, given) in zip(one.constants(), sets[0].constants()):
            if type(value) is not type(given) or value != given:
                raise UsageError(
                    f"{where}: input set {index} gives {name}={value!r} where input set 1 gives {given!r}: a "
                    "non-tensor argument is baked into every exported artifact as a constant, so it must be the "
                    "same in every input set (make it a tensor, or check each value in a run of its own)")
    return sets


def _inputs_named(one: InputSet) -> list[str]:
    """Each tensor and constant of an input set by where it goes: args[0], args[1][2], x, x['mask']..."""
    return [_place(path) for path, _ in pytree.tree_flatten_with_path((one.args, one.kwargs))[0]]


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


def top_level(one: InputSet, signature: inspect.Signature | None) -> list[tuple[str, object]]:
    """The call's arguments as (name, value): positional ones under their parameter's name where the
    signature names them (else args[i]), then the keyword ones."""
    params = [p.name for p in (signature.parameters.values() if signature else ())
              if p.kind in (inspect.Parameter.POSITIONAL_ONLY, inspect.Parameter.POSITIONAL_OR_KEYWORD)]
    named = [(params[i] if i < len(params) else f"args[{i}]", value) for i, value in enumerate(one.args)]
    return named + list(one.kwargs.items())


def _is_dim_spec(x) -> bool:
    return x is None or (isinstance(x, dict) and all(isinstance(k, int) for k in x))


def infer_dynamic_shapes(sets: list[InputSet], signature: inspect.Signature | None = None):
    """Mark every dimension that differs between input sets as dynamic, in torch.export form: a tuple
    for positional arguments, a dict by name for keyword ones or a mixed call.

    Returns None when all sets share every shape. Uses Dim.DYNAMIC, so an export that would
    silently specialize such a dimension fails instead, with the reason. Constants get None.
    """
    from compatcheck.torch_features import dynamic_dim

    shapes = [[tuple(t.shape) for t in s.leaves()] for s in sets]
    first = shapes[0]
    specs = []
    for leaf_index, shape in enumerate(first):
        for other_index, other in enumerate(shapes[1:], 2):
            if len(other[leaf_index]) != len(shape):
                raise UsageError(
                    f"input set {other_index}: input {leaf_index} has {len(other[leaf_index])} dimensions, "
                    f"input set 1 has {len(shape)}"
                )
        dims = {d: dynamic_dim(f"input{leaf_index}_dim{d}") for d in range(len(shape))
                if any(o[leaf_index][d] != shape[d] for o in shapes)}
        specs.append(dims or None)
    if not any(specs):
        return None
    per_tensor = iter(specs)
    flat, tree = pytree.tree_flatten((sets[0].args, sets[0].kwargs))
    args_spec, kwargs_spec = pytree.tree_unflatten(
        [next(per_tensor) if isinstance(leaf, torch.Tensor) else None for leaf in flat], tree)
    if not sets[0].kwargs:
        return tuple(args_spec)
    if not sets[0].args:
        return kwargs_spec
    names = [name for name, _ in top_level(sets[0], signature)]
    if any(name.startswith("args[") for name in names):
        raise UsageError("a compatcheck.Call mixes positional and keyword inputs for a forward whose parameters "
                         "cannot all be named: give get_dynamic_shapes() a dict by parameter name")
    return dict(zip(names, [*args_spec, *kwargs_spec.values()]))


def declared_per_input(spec: "ModelSpec") -> list[tuple[str, object, object]]:
    """(name, value, its entry in the dynamic shapes) per top-level input of input set 1."""
    shapes = spec.dynamic_shapes
    named = top_level(spec.input_sets[0], spec.signature)
    if isinstance(shapes, dict):
        per_input = [shapes.get(name) for name, _ in named]
    else:
        per_input = list(shapes or ()) + [None] * (len(named) - len(shapes or ()))
    return [(name, value, given) for (name, value), given in zip(named, per_input)]


def dynamic_dims(spec: "ModelSpec") -> list[set[int]]:
    """The dimensions declared dynamic, per tensor (in InputSet.leaves() order)."""
    if spec.dynamic_shapes is None:
        return [set() for _ in spec.input_sets[0].leaves()]
    found = []
    for _, value, given in declared_per_input(spec):
        tensors = [leaf for leaf in pytree.tree_leaves(value) if isinstance(leaf, torch.Tensor)]
        if not tensors:
            continue
        leaves = pytree.tree_leaves(given, is_leaf=_is_dim_spec)
        if given is None or len(leaves) != len(tensors):
            leaves = [None] * len(tensors)
        found += [set(leaf or {}) for leaf in leaves]
    return found


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


def _check_padding(raw, first: InputSet) -> dict:
    """PADDING: {input name: the value a shorter sample is padded with, at the end of every dim but the batch}."""
    if raw is None:
        return {}
    names = first.names or []
    if not isinstance(raw, dict):
        raise UsageError("PADDING must be a dict from input name to pad value, like {'input_ids': 0}")
    for name, value in raw.items():
        if name not in names:
            raise UsageError(f"PADDING names {name!r}, which is no tensor input of forward; its tensor inputs are "
                             f"{', '.join(names)}")
        if isinstance(value, bool) or not isinstance(value, (int, float)) or not math.isfinite(value):
            raise UsageError(f"PADDING[{name!r}] must be a finite number, got {value!r}")
    return dict(raw)


def _batch_dim_value(value, where: str, or_dict: str = "") -> None:
    if value is not None and (isinstance(value, bool) or not isinstance(value, int) or value < 0):
        raise UsageError(f"{where} must be a dim index (an int >= 0), None for no batch dim{or_dict}, got {value!r}")


def check_batch_dim(raw, sets: list[InputSet], where: str):
    """BATCH_DIM: the dim of every tensor input that holds the batch, None where none does, or a dict
    by input name (an input it leaves out keeps dim 0)."""
    names = sets[0].names or []
    for name, value in raw.items() if isinstance(raw, dict) else [(None, raw)]:
        if name is not None and name not in names:
            raise UsageError(f"{where} names {name!r}, which is no tensor input of forward; its tensor inputs are "
                             f"{', '.join(names)}")
        if name is None:
            _batch_dim_value(value, where, ", or a dict of those by input name")
        else:
            _batch_dim_value(value, f"{where}[{name!r}]")
    for one in sets:
        for name, leaf, dim in zip(names, one.leaves(), resolve_batch_dims(raw, names)):
            if dim and leaf.dim() <= dim:  # a 0-d tensor has no dim 0: it is simply not checked as a batch
                raise UsageError(f"{where} puts {name}'s batch on dim {dim}, but {name} has {leaf.dim()} dim"
                                 f"{'' if leaf.dim() == 1 else 's'} (shape {list(leaf.shape)})")
    return raw


def resolve_batch_dims(raw, names: list[str]) -> list[int | None]:
    """Per tensor input (in InputSet.leaves() order), the dim BATCH_DIM puts its batch on, or None."""
    return [raw.get(name, 0) if isinstance(raw, dict) else raw for name in names]


def load(path: Path, factory: str = "get_model", rewritten: Path | None = None) -> ModelSpec:
    """The model file's model, input sets and settings. With `rewritten` (a rewritten copy of the file, as
    `compatcheck fix` makes) the copy's model is the one under test, loaded as if it were the file, and
    the original's is the reference every stage, eager included, is compared with."""
    path = Path(path).resolve()
    check_model_path(path)
    user = UserCode(path)
    original = _import(path, user, name=module_name(path) + "_original") if rewritten else None
    module = _import(path, user, text=Path(rewritten).read_text(encoding="utf-8") if rewritten else None)
    shown = user.display(str(path))

    make = getattr(module, factory, None)
    if not callable(make):
        raise UsageError(f"{shown} defines no function {factory}()")
    get_inputs = getattr(module, "get_inputs", None)
    if not callable(get_inputs):
        raise UsageError(f"{shown} defines no function get_inputs()")

    reseed(SEED)
    model, sites = _call(user, lambda: _build_recording_sites(user, make), f"{factory}()")
    if not isinstance(model, torch.nn.Module):
        raise UsageError(f"{factory}() returned {type(model).__name__}; expected a torch.nn.Module")
    build_sites = {name: sites[id(module)] for name, module in model.named_modules() if id(module) in sites}
    pristine = Pristine(model, rebuild=make)
    reseed(SEED)
    raw_inputs = _call(user, get_inputs, "get_inputs()")
    get_dynamic = getattr(module, "get_dynamic_shapes", None)
    dynamic = _call(user, get_dynamic, "get_dynamic_shapes()") if callable(get_dynamic) else INFER
    spec = assemble(path, factory, model, raw_inputs, "get_inputs()", dynamic,
                    getattr(module, "TOLERANCE", None), "TOLERANCE", pristine=pristine,
                    batch_dim=(getattr(module, "BATCH_DIM", 0), "BATCH_DIM"))
    spec.build_sites = build_sites
    spec.padding = _check_padding(getattr(module, "PADDING", None), spec.given_inputs[0])
    if original is not None:
        spec.reference, spec.covered = _reference(user, original, factory, pristine), LinesRun(vars(original))
    return spec


def _reference(user: UserCode, original, factory: str, rewritten: Pristine) -> Pristine:
    """The original model file's model, built under the same seed as its rewritten copy's: the copy must
    hold the same weights, or its answers could not be held to the original's."""
    make = getattr(original, factory, None)
    if not callable(make):
        raise UsageError(f"the original model file defines no function {factory}()")
    reseed(SEED)
    model = _call(user, make, f"the original's {factory}()")
    held = Pristine(model, rebuild=make)
    differs = snapshot.differs(rewritten.original.state_dict(), held.state)
    if differs:
        raise UsageError(f"the rewritten model's weights are not the original's: {differs}")
    held.globals = Globals(user)
    return held


INFER = "infer"  # dynamic shapes not given: every dimension that differs between input sets is dynamic


def _forward_signature(model) -> inspect.Signature | None:
    try:
        return inspect.signature(model.forward)
    except (TypeError, ValueError):
        return None


def named_inputs(model, raw_inputs, inputs_from: str) -> tuple[list[InputSet], inspect.Signature | None]:
    """The input sets, checked, with their tensors named by the parameters of forward; its signature."""
    sets = normalize_inputs(raw_inputs, inputs_from)
    signature = _forward_signature(model)
    for one in sets:
        one.names = [name + pytree.keystr(path) for name, value in top_level(one, signature)
                     for path, leaf in pytree.tree_flatten_with_path(value)[0] if isinstance(leaf, torch.Tensor)]
    return sets, signature


def assemble(path: Path, factory: str, model, raw_inputs, inputs_from: str, dynamic_shapes, tolerance,
             tolerance_from: str, *, is_object: bool = False, pristine: Pristine | None = None,
             batch_dim: tuple = (0, "batch_dim")) -> ModelSpec:
    """A ModelSpec from the parts, checked; `*_from` and `batch_dim`'s second item name where a bad part
    came from in errors."""
    if not isinstance(model, torch.nn.Module):
        raise UsageError(f"the model is {type(model).__name__}; expected a torch.nn.Module")
    sets, signature = named_inputs(model, raw_inputs, inputs_from)
    inferred = isinstance(dynamic_shapes, str) and dynamic_shapes == INFER
    if inferred:
        dynamic_shapes = infer_dynamic_shapes(sets, signature)
    arrived_training = model.training
    model.eval()
    pristine = pristine or Pristine(model)
    pristine.globals = pristine.globals or Globals(UserCode(Path(path)))
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
        pristine=pristine,
        signature=signature,
        batch_dim=check_batch_dim(batch_dim[0], sets, batch_dim[1]),
    )
