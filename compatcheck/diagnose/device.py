"""Device traps, found on the CPU: forward run once more with the model and its inputs on the `meta` device
(the default device left alone), so that every tensor forward makes without the input's device comes out
on the CPU and meets the input's meta tensors, as it would meet CUDA tensors on a GPU.

A TorchFunctionMode watches that run: it remembers where each CPU tensor was made (a factory in the user's
code, and what is computed from it), and where one that is not a 0-d scalar (which mixes with any device)
meets a meta tensor it is a trap, at the line that made it, with the rewrite that fits that line. So is a
`.cpu()` or `.to("cpu")` (meta refuses to copy out), a plain tensor attribute that `model.to(device)` does
not move, and a CPU tensor returned. The run goes on past each trap with the tensor moved, so one run finds
them all. Where it stops for another reason (an op without a meta kernel, `.item()`, `.numpy()`), the rest
of forward is "not checked on meta", never a finding. A `torch.cuda.is_available()` call in forward is a
trap for trace and export, which bake in the branch taken where they ran.
"""

from __future__ import annotations

import ast
import copy
import importlib
import inspect
import linecache
import re
import sys
import textwrap
import types
import warnings
from contextlib import contextmanager
from dataclasses import dataclass
from pathlib import Path

import torch
from torch.overrides import TorchFunctionMode
from torch.utils import _pytree as pytree

from compatcheck.errors import one_line
from compatcheck.frames import library_path, machinery
from compatcheck.report.model import Finding
from compatcheck.diagnose.found import finding_at

FACTORIES = {
    torch.zeros, torch.ones, torch.empty, torch.full, torch.arange, torch.range, torch.linspace, torch.logspace,
    torch.eye, torch.tensor, torch.as_tensor, torch.rand, torch.randn, torch.randint, torch.randperm,
    torch.from_numpy,
}
# The method that makes the same tensor on another tensor's device (and with its dtype).
NEW_METHODS = {torch.zeros: "new_zeros", torch.ones: "new_ones", torch.empty: "new_empty", torch.full: "new_full"}
# Calls that move or copy between devices, or index with a CPU tensor: mixing is what they are for.
MOVES = {torch.Tensor.to, torch.Tensor.type_as, torch.Tensor.copy_, torch.Tensor.cpu, torch.Tensor.__getitem__}
_MIXED = ("is not on the expected device", "Expected all tensors to be on the same device")
_COPY_OUT = "Cannot copy out of meta tensor"
_TO_CPU = re.compile(r"""\.to\(\s*(?:device\s*=\s*)?(?:(["'])cpu\1|torch\.device\(\s*(["'])cpu\2\s*\))\s*\)$""")
_HERE = str(Path(__file__).resolve())


@dataclass
class Where:
    """A line of the user's code, with the span of the call made there (None where it spans lines)."""

    file: str
    line: int
    span: tuple[int, int] | None  # UTF-8 byte columns of the call on the line
    tensor: str | None = None  # a local holding one of the inputs' (meta) tensors, for `device=x.device`
    dtype: torch.dtype | None = None  # that tensor's

    @property
    def pair(self) -> tuple[str, int]:
        return self.file, self.line

    def call(self) -> str | None:
        raw = linecache.getline(self.file, self.line).rstrip("\n").encode()
        return raw[self.span[0]:self.span[1]].decode() if self.span else None

    def replaced(self, new: str) -> str:
        """The line, stripped, with the call replaced by `new`."""
        raw = linecache.getline(self.file, self.line).rstrip("\n").encode()
        return (raw[:self.span[0]] + new.encode() + raw[self.span[1]:]).decode().strip()


@dataclass
class Made:
    """Where a CPU tensor was made: the factory call, or the attribute or global that holds it."""

    what: str  # "torch.zeros", "self.scale", "TABLE"
    where: Where | None
    factory: object = None
    explicit_device: bool = False
    dtype: torch.dtype | None = None
    assigned: str | None = None  # for an attribute: the expression assigned to it


def _where(frame) -> Where:
    lasti = frame.f_lasti // 2
    positions = next((p for i, p in enumerate(frame.f_code.co_positions()) if i == lasti), None)
    span = None
    if positions and positions[0] == positions[1] == frame.f_lineno and None not in positions[2:]:
        span = (positions[2], positions[3])
    return Where(frame.f_code.co_filename, frame.f_lineno, span, *_input_local(frame))


def _input_local(frame) -> tuple[str | None, torch.dtype | None]:
    """A local holding a meta tensor (one of the inputs, or computed from them), the function's own
    parameters first: its name and dtype."""
    code = frame.f_code
    names = code.co_varnames[:code.co_argcount + code.co_kwonlyargcount] + tuple(frame.f_locals)
    for name in dict.fromkeys(names):
        value = frame.f_locals.get(name)
        if isinstance(value, torch.Tensor) and value.is_meta and name != "self":
            return name, value.dtype
    return None, None


class _Watch(TorchFunctionMode):
    def __init__(self, user, model: torch.nn.Module):
        super().__init__()
        self.user = user
        self.made: dict[int, tuple[torch.Tensor, Made]] = {}  # id -> (the tensor, kept alive; where it was made)
        self.attributes = {id(value): (module, name) for module in model.modules()
                           for name, value in vars(module).items() if isinstance(value, torch.Tensor)}
        self.traps: dict[tuple, Finding] = {}

    def caller(self):
        """The innermost frame outside torch and this file: the code that made the call."""
        frame = sys._getframe(2)
        while frame is not None and (frame.f_code.co_filename == _HERE or machinery(frame.f_code.co_filename)):
            frame = frame.f_back
        return frame

    def user_frame(self):
        frame = sys._getframe(2)
        while frame is not None and not self.user.owns(frame.f_code.co_filename):
            frame = frame.f_back
        return frame

    def __torch_function__(self, func, types, args=(), kwargs=None):
        kwargs = kwargs or {}
        leaves = [leaf for leaf in pytree.tree_leaves((args, kwargs)) if isinstance(leaf, torch.Tensor)]
        on_cpu = [t for t in leaves if t.device.type == "cpu" and t.dim() > 0]
        mixed = bool(on_cpu) and any(t.is_meta for t in leaves) and func not in MOVES
        if mixed and func is torch.Tensor.__setitem__:  # a CPU index is fine; a CPU target or value is not
            on_cpu = [t for t in on_cpu if t is args[0] or t is args[-1]]
            mixed = bool(on_cpu)
        if mixed:
            for tensor in on_cpu:
                self.trap_mixed(tensor, func)
            args, kwargs = _to_meta((args, kwargs), on_cpu)
        try:
            result = func(*args, **kwargs)
        except NotImplementedError as exc:
            if _COPY_OUT not in str(exc) or func not in (torch.Tensor.cpu, torch.Tensor.to):
                raise
            self.trap_copy_out(func)
            return args[0]
        except RuntimeError as exc:
            if not any(words in str(exc) for words in _MIXED):
                raise
            cpu = [t for t in leaves if t.device.type == "cpu"]
            for tensor in cpu:
                self.trap_mixed(tensor, func)
            args, kwargs = _to_meta((args, kwargs), cpu)
            result = func(*args, **kwargs)
        self.follow(func, args, kwargs, result, leaves)
        return result

    def follow(self, func, args, kwargs, result, leaves) -> None:
        """Remember where a CPU result was made: by a factory in the user's (or a library's) code, or from a
        CPU tensor already followed."""
        outputs = [t for t in pytree.tree_leaves(result) if isinstance(t, torch.Tensor) and t.device.type == "cpu"]
        if not outputs:
            return
        if func in FACTORIES:
            frame = self.caller()
            if frame is None or not (self.user.owns(frame.f_code.co_filename) or self.user_frame() is not None):
                return
            user = frame if self.user.owns(frame.f_code.co_filename) else self.user_frame()
            made = Made(f"torch.{func.__name__}", _where(user) if user is frame else
                        Where(user.f_code.co_filename, user.f_lineno, None), func, "device" in kwargs, outputs[0].dtype)
        else:
            made = next((self.made[id(t)][1] for t in leaves if id(t) in self.made), None)
            if made is None:
                return
        for tensor in outputs:
            self.made[id(tensor)] = (tensor, made)

    def origin(self, tensor: torch.Tensor) -> Made | None:
        if id(tensor) in self.made:
            return self.made[id(tensor)][1]
        if id(tensor) in self.attributes:
            module, name = self.attributes[id(tensor)]
            where, assigned = _assignment(module, name, self.user)
            return Made(f"self.{name}", where, assigned=assigned)
        frame = self.user_frame()
        named = next((name for name, value in (frame.f_globals.items() if frame else ()) if value is tensor), None)
        return Made(named, None) if named else None

    def trap_mixed(self, tensor: torch.Tensor, func) -> None:
        use_frame = self.user_frame()
        use = (use_frame.f_code.co_filename, use_frame.f_lineno) if use_frame else None
        made = self.origin(tensor)
        meets = f"{_name(func)} at {self.user.display(use[0])}:{use[1]}" if use else _name(func)
        if made is None or (made.where is None and not made.what):
            return self.add(use, "a tensor", f"a CPU tensor meets the input's tensors in {meets}: on a GPU this "
                            "mixes devices and fails (found on the meta device)")
        if made.what.startswith("self."):
            return self.add(made.where.pair if made.where else use, made.what,
                            f"{made.what} is a plain tensor attribute, not a parameter or buffer: model.to(device) "
                            f"leaves it on the CPU, and on a GPU {meets} mixes it with CUDA tensors and fails (found "
                            "on the meta device); register it as a buffer, which moves with the model",
                            _buffer(made))
        if made.factory is None:
            return self.add(use, made.what, f"{made.what}, a module-level tensor, stays on the CPU: on a GPU {meets} "
                            "mixes it with CUDA tensors and fails (found on the meta device); register it as a buffer "
                            "in __init__ (self.register_buffer(...)) and use that")
        self.add_made(made, f"on a GPU {meets} mixes it with the input's CUDA tensors and fails")

    def add_made(self, made: Made, then: str) -> None:
        given = "with device= the CPU here" if made.explicit_device else "without a device"
        self.add(made.where.pair, made.what,
                 f"{made.what} {given} makes a CPU tensor whatever device the model runs on: {then} (found on the "
                 f"meta device); make it on the input's device", _factory_rewrite(made))

    def trap_copy_out(self, func) -> None:
        frame = self.user_frame()
        where = _where(frame) if frame is not None else None
        call = where.call() if where else None
        rewrite = None
        if call and call.endswith(".cpu()"):
            rewrite = where.replaced(call[:-len(".cpu()")])
        elif call and _TO_CPU.search(call):
            rewrite = where.replaced(_TO_CPU.sub("", call))
        self.add(where.pair if where else None, _name(func),
                 f"{_name(func)} in forward copies to the host: on a GPU every call waits for the device, and the ops "
                 "after it mix CPU and CUDA tensors and fail, or the output leaves the GPU (found on the meta device); "
                 "keep the tensor on its device", rewrite)

    def add(self, where, op: str, message: str, rewrite: str | None = None) -> None:
        key = (where, op)
        if key not in self.traps:
            self.traps[key] = finding_at(self.user, "eager", "device", message, location=where, op=op, rewrite=rewrite)


def _to_meta(tree, tensors: list[torch.Tensor]):
    moving = {id(t) for t in tensors}
    return pytree.tree_map(lambda leaf: leaf.to("meta") if isinstance(leaf, torch.Tensor) and id(leaf) in moving
                           else leaf, tree)


def _name(func) -> str:
    name = getattr(func, "__name__", str(func))
    return f".{name}()" if getattr(func, "__objclass__", None) is torch._C.TensorBase or \
        getattr(torch.Tensor, name, None) is func else f"torch.{name}"


def _factory_rewrite(made: Made) -> str | None:
    """The line with the factory call made on the input's device: `x.new_zeros(...)` where that keeps the
    dtype, else `device=x.device` added."""
    where = made.where
    call = where.call() if where else None
    if not call or not where.tensor or not call.endswith(")") or "(" not in call:
        return None
    open_at = call.index("(")
    callee, inner = call[:open_at], call[open_at + 1:-1]
    x = where.tensor
    if made.explicit_device:
        replaced, count = re.subn(r"\bdevice\s*=\s*[\w.'\"]+", f"device={x}.device", inner)
        return where.replaced(f"{callee}({replaced})") if count == 1 else None
    new = NEW_METHODS.get(made.factory)
    if new and "dtype" not in inner and made.dtype == where.dtype:
        return where.replaced(f"{x}.{new}({inner})")
    separator = "" if not inner.strip() or inner.rstrip().endswith(",") else ", "
    return where.replaced(f"{callee}({inner}{separator}device={x}.device)")


def _assignment(module: torch.nn.Module, name: str, user) -> tuple[Where | None, str | None]:
    """Where the module's class assigns `self.<name> = ...` in the user's code, and what it assigns."""
    try:
        lines, start = inspect.getsourcelines(type(module))
        file = inspect.getsourcefile(type(module))
    except (OSError, TypeError):
        return None, None
    if not user.owns(file):
        return None, None
    source = textwrap.dedent("".join(lines))
    for node in ast.walk(ast.parse(source)):
        if isinstance(node, ast.Assign) and any(isinstance(t, ast.Attribute) and t.attr == name and
                                                isinstance(t.value, ast.Name) and t.value.id == "self"
                                                for t in node.targets):
            single = node.lineno == node.end_lineno
            return Where(file, start + node.lineno - 1, None), ast.get_source_segment(source, node.value) \
                if single else None
    return None, None


def _buffer(made: Made) -> str | None:
    """`self.register_buffer("scale", <what was assigned>)` for the assignment line."""
    if made.where is None or made.assigned is None:
        return None
    return f'self.register_buffer("{made.what.removeprefix("self.")}", {made.assigned})'


@dataclass
class DeviceCheck:
    findings: list[Finding]
    note: str | None  # how far forward was checked, where the meta run stopped short


def device_traps(ctx) -> DeviceCheck:
    """Run forward on the meta device and report its device traps; see the module's docstring."""
    user = ctx.spec.user
    try:
        model = (ctx.spec.pristine.copy() if ctx.spec.pristine else copy.deepcopy(ctx.spec.model)).to("meta")
        input_set = ctx.spec.input_sets[0].map(lambda t: t.to("meta"))
    except Exception as exc:
        return DeviceCheck([], f"device traps not checked on meta: moving the model there raised {one_line(exc)}")
    watch = _Watch(user, model)
    branches: list[Where] = []
    is_available = torch.cuda.is_available

    def recording(*args, **kwargs):
        frame = sys._getframe(1)
        if user.owns(frame.f_code.co_filename):
            branches.append(_where(frame))
        return is_available(*args, **kwargs)

    note = None
    torch.cuda.is_available = recording
    try:
        with warnings.catch_warnings(), _dynamo_deferred(), watch:
            warnings.simplefilter("ignore")
            output = model(*input_set.args, **input_set.kwargs)
        for tensor in pytree.tree_leaves(output):
            if isinstance(tensor, torch.Tensor) and tensor.device.type == "cpu" and tensor.dim() > 0:
                made = watch.origin(tensor)
                if made is not None and made.factory is not None:
                    watch.add_made(made, "forward returns it on the CPU while the input is on the GPU")
    except Exception as exc:
        stack = user.exception_stack(exc)
        frame = user.innermost(stack)
        past = f" past {user.display(frame.filename)}:{frame.lineno}" if frame else ""
        library = user.library_frame(stack)  # where a library's code stopped it
        within = f"{library_path(library[0], user.packages)}:{library[1]}: " if library else ""
        said = str(exc).strip().splitlines()
        note = f"device traps not checked on meta{past} ({within}{said[0][:120] if said else type(exc).__name__})"
    finally:
        torch.cuda.is_available = is_available
    findings = list(watch.traps.values())
    for where in {w.pair: w for w in branches}.values():
        findings.append(_branch_finding(user, where))
    return DeviceCheck(findings, note)


@contextmanager
def _dynamo_deferred():
    """torch's Python meta kernels (batch norm's, addmm's...) call refs wrapped in torch._disable_dynamo, whose
    first call imports torch._dynamo (1-2 s) only to mark the ref as one dynamo must not trace (newer torch
    has a fast path that imports nothing). Nothing is traced during the meta run, so until it ends a stand-in
    module marks nothing, and the marks it made are removed after: each ref is marked for real on its next
    call. Anything else asked of torch._dynamo meanwhile imports the real one, and ends the stand-in there."""
    if "torch._dynamo" in sys.modules or "_dynamo" in vars(torch):
        yield
        return
    unmarked = []

    def restore() -> None:
        if sys.modules.get("torch._dynamo") is stand_in:
            del sys.modules["torch._dynamo"]
        if vars(torch).get("_dynamo") is stand_in:
            del torch._dynamo
        for fn in unmarked:  # torch caches what disable returned on the function itself: here, the function
            for key in [key for key, value in vars(fn).items() if value is fn]:
                delattr(fn, key)
        unmarked.clear()

    class StandIn(types.ModuleType):
        def __getattr__(self, name):  # every name but `disable`
            restore()
            return getattr(importlib.import_module("torch._dynamo"), name)

    def disable(fn, *args, **kwargs):
        unmarked.append(fn)
        return fn

    stand_in = StandIn("torch._dynamo")
    stand_in.disable = disable
    sys.modules["torch._dynamo"] = torch._dynamo = stand_in
    try:
        yield
    finally:
        restore()


def _branch_finding(user, where: Where) -> Finding:
    call = where.call()
    rewrite = where.replaced(f"{where.tensor}.is_cuda") if call == "torch.cuda.is_available()" and where.tensor \
        else None
    return finding_at(user,
        "eager", "device",
        "forward branches on torch.cuda.is_available(), which is about the machine, not the input: torch.jit.trace "
        "and torch.export bake in the branch taken where they ran (the CPU one here), whatever device the artifact "
        "then runs on; branch on the input's device, and trace or export on the device you deploy to",
        location=where.pair, op="torch.cuda.is_available()", rewrite=rewrite)


def _at(user, stacks: list[str], what: list[str], innermost: int) -> str:
    """'aten.zeros at model.py:12 and 2 more' for the ops that name a device, by the user's lines; `innermost`
    is where a stack's innermost frame is: -1 for Python's order, 0 for the tracer's."""
    located = [(op, user.locations(stack)) for op, stack in zip(what, stacks)]
    first = next(((op, found[innermost]) for op, found in located if found), (what[0], None))
    where = f" at {user.display(first[1][0])}:{first[1][1]}" if first[1] else ""
    more = f" and {len(what) - 1} more" if len(what) > 1 else ""
    return f"{first[0]}{where}{more}"


def trace_note(traced, user) -> str | None:
    """A note where the trace holds the CPU as a device constant: it then runs on the CPU only. A model that
    makes its tensors with device=x.device leaves the same constant as one that names no device."""
    graph = traced.inlined_graph  # its nodes live only as long as this graph
    uses = [use.user for node in graph.findAllNodes("prim::Constant")
            if node.output().type().kind() == "DeviceObjType" and node.s("value") == "cpu"
            for use in node.output().uses()]
    if not uses:
        return None
    found = _at(user, [use.sourceRange() for use in uses], [use.kind() for use in uses], innermost=0)
    return f"the trace holds the device cpu as a constant ({found}): it runs on the CPU only; trace on the device " \
           "you deploy to"


def program_note(program, user) -> str | None:
    """A note where the exported program makes tensors on the CPU: it runs there only unless moved."""
    nodes = [node for node in program.graph.nodes if node.op == "call_function" and any(
        isinstance(value, torch.device) and value.type == "cpu" for value in (*node.args, *node.kwargs.values()))]
    if not nodes:
        return None
    found = _at(user, [node.meta.get("stack_trace") or "" for node in nodes],
                [str(node.target).removesuffix(".default") for node in nodes], innermost=-1)
    return (f"the exported program makes tensors on the cpu ({found}): it runs on the CPU only; export on the device "
            "you deploy to, or move it: torch.export.passes.move_to_device_pass(program, 'cuda')")
