"""A model's state_dict taken as values, to prove a copy of the model equal to the model as built.

A state_dict holds more than tensors: a torch.ao quantized module keeps its packed weights as a
ScriptObject (or a tuple of a quantized weight and a bias) beside a torch.dtype, and a module's extra
state may be any picklable value. Each entry is taken apart with pytree; a ScriptObject by the state
it pickles to; a tensor is cloned, and every other leaf deep-copied and compared with ==.
"""

from __future__ import annotations

import copy

import torch
from torch.utils import _pytree as pytree


def _leaf(value):
    if isinstance(value, torch.Tensor):
        return value.detach().clone()
    if isinstance(value, torch.ScriptObject):
        # Its class and what it pickles to: a quantized module's packed weight and bias, say.
        name = value._type().qualified_name()
        return ("ScriptObject", name, take(value.__getstate__()) if value._has_method("__getstate__") else value)
    try:
        return copy.deepcopy(value)
    except Exception:  # compared as the object it is
        return value


def take(value):
    """One state_dict entry as a value of its own: what later changes the model does not change."""
    return pytree.tree_map(_leaf, value)


def _same_leaf(a, b) -> bool:
    if isinstance(a, torch.Tensor) or isinstance(b, torch.Tensor):
        return (isinstance(a, torch.Tensor) and isinstance(b, torch.Tensor) and a.shape == b.shape
                and a.dtype == b.dtype and torch.equal(a.detach().cpu(), b.detach().cpu()))
    if isinstance(a, torch.ScriptObject) or isinstance(b, torch.ScriptObject):
        return a is b  # one that pickles to nothing: only the object itself is known to be equal
    try:
        return type(a) is type(b) and bool(a == b)
    except Exception:  # an == that cannot answer: not proven equal
        return False


def same(a, b) -> bool:
    """Whether two takes are equal bit for bit: the same structure, and every leaf equal."""
    a_leaves, a_tree = pytree.tree_flatten(a)
    b_leaves, b_tree = pytree.tree_flatten(b)
    return a_tree == b_tree and all(_same_leaf(x, y) for x, y in zip(a_leaves, b_leaves))


def differs(state: dict, first: dict) -> str | None:
    """How a copy's state_dict differs from `first` (each entry a `take`), or None when it is equal."""
    if list(state) != list(first):
        return f"its state_dict has other entries ({', '.join(sorted(set(state) ^ set(first))[:3])})"
    return next((f"{name} differs" for name, value in state.items() if not same(take(value), first[name])), None)
