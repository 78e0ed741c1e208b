"""NaN/Inf in reduced precision: where eager gives them that the float64 run does not, and the first op that
gives them from finite inputs, with its stack and the module it ran in (by its qualified name)."""

from __future__ import annotations

import traceback

import torch
from torch.utils import _pytree as pytree
from torch.utils._python_dispatch import TorchDispatchMode

from compatcheck.compare import flatten
from compatcheck.variation import SEEDS, reseed


def floating(value) -> list[torch.Tensor]:
    return [leaf for leaf in pytree.tree_leaves(value) if isinstance(leaf, torch.Tensor) and leaf.is_floating_point()]


def finite_where_float64_is(ctx, outputs, index: int) -> bool:
    """Every floating output is finite wherever the float64 run's is (the float32 answers' where the
    model refuses float64)."""
    truth = ctx.fp64(index)
    if isinstance(truth, BaseException):
        truth = ctx.float32(index)
    got = [leaf for _, leaf in flatten(outputs)[0]]
    want = [leaf for _, leaf in flatten(truth)[0]] if not isinstance(truth, BaseException) else []
    for position, mine in enumerate(got):
        if not (isinstance(mine, torch.Tensor) and mine.is_floating_point()):
            continue
        theirs = want[position] if position < len(want) else None
        finite = torch.isfinite(theirs) if isinstance(theirs, torch.Tensor) and theirs.shape == mine.shape else \
            torch.ones_like(mine, dtype=torch.bool)
        if bool((finite & ~torch.isfinite(mine)).any()):
            return False
    return True


def failing(ctx) -> list[int]:
    """The input sets where eager in the dtype gives NaN/Inf that the float64 run does not."""
    return [index for index, outputs in enumerate(ctx.reference) if not finite_where_float64_is(ctx, outputs, index)]


class _Found(Exception):
    """Ends the run at the first NaN/Inf: nothing after it changes what is reported."""


def _finite(value) -> bool:
    return all(bool(torch.isfinite(t).all()) for t in floating(value))


class _FirstNonFinite(TorchDispatchMode):
    """Records the first op whose floating outputs hold NaN/Inf while its floating inputs were finite,
    with the stack and the module it ran in."""

    def __init__(self, modules: list[str]):
        super().__init__()
        self.modules = modules  # the stack of modules running now, outermost first
        self.found: tuple | None = None

    @classmethod
    def _should_skip_dynamo(cls) -> bool:  # eager ops only: no need to import Dynamo (seconds) to keep it out
        return False

    def __torch_dispatch__(self, func, types, args=(), kwargs=None):
        out = func(*args, **(kwargs or {}))
        if self.found is None and not _finite(out) and _finite((args, kwargs)):
            nan = any(bool(torch.isnan(t).any()) for t in floating(out))
            self.found = (f"aten.{func.overloadpacket.__name__}", self.modules[-1] if self.modules else "",
                          "NaN" if nan else "Inf", traceback.extract_stack()[:-1])
            raise _Found  # kept in self.found even where the model's own code catches it
        return out


def _run(model, one) -> None:
    reseed(SEEDS[0])
    try:
        with torch.no_grad():
            model(*one.args, **one.kwargs)
    except _Found:
        pass


def first_module(model, input_sets, indices: list[int]) -> tuple[str, int] | None:
    """(module, input set) of the innermost module that first gives NaN/Inf from finite inputs ("" for the
    model's own forward) when `model` runs the input sets `indices` in turn; None where none does. Module
    hooks only: far cheaper than watching every op."""
    found: list[str] = []

    def hook(name):
        def check(module, args, kwargs, output):
            if not found and not _finite(output) and _finite((args, kwargs)):
                found.append(name)  # hooks run innermost first: the first to see it is the innermost
                raise _Found
        return check

    handles = [module.register_forward_hook(hook(name), with_kwargs=True) for name, module in model.named_modules()]
    try:
        for index in indices:
            _run(model, input_sets[index])
            if found:
                return found[0], index
    finally:
        for handle in handles:
            handle.remove()
    return None


def first_non_finite(model, input_sets, indices: list[int]) -> tuple | None:
    """(op, module, 'NaN' or 'Inf', stack, input set) of the first op that gives NaN/Inf from finite inputs
    in the module that first does (first_module), with the module it ran in; None where none does."""
    where = first_module(model, input_sets, indices)
    if where is None:
        return None
    target = model.get_submodule(where[0])
    running: list[str] = []
    mode = _FirstNonFinite(running)
    watched = target.forward

    def forward(*args, **kwargs):  # only this module's ops are watched, op by op
        with mode:
            return watched(*args, **kwargs)

    def enter(name):
        def hook(module, args):
            running.append(name)
        return hook

    def leave(module, args, output):
        running.pop()

    handles = []
    for name, module in model.named_modules():
        handles += [module.register_forward_pre_hook(enter(name)), module.register_forward_hook(leave)]
    target.forward = forward
    try:
        _run(model, input_sets[where[1]])
    finally:
        del target.forward
        for handle in handles:
            handle.remove()
    return (*mode.found, where[1]) if mode.found else None
