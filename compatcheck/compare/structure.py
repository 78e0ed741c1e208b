"""What is compared: outputs flattened into named leaves, each leaf read as a plain tensor.

Outputs are flattened with torch's pytree (dataclasses by field). A dict, list or tuple subclass pytree
does not know (a library's output class) is compared by its items and attributes, and any other object
by the data attributes it holds (a library's cache), never by its type or `==` alone. A leaf is read as
a dense, strided tensor with its conjugate and negative bits resolved, so a sparse, quantized or lazily
conjugated output is compared by its values."""

from __future__ import annotations

import collections
import dataclasses
import enum

import numpy as np
import torch
from torch.utils import _pytree as pytree

# Leaves compared as values; any other object pytree leaves whole is compared by what it holds.
VALUES = (torch.Tensor, np.ndarray, np.generic, bool, int, float, complex, str, bytes, type(None), torch.dtype,
          torch.device, enum.Enum)
_MAX_DEPTH = 8  # objects inside objects: a cache of layers of tensors is three deep


def _known(obj) -> bool:
    """Whether pytree opens `obj` itself: a registered container, or a namedtuple."""
    return type(obj) in pytree.SUPPORTED_NODES or (isinstance(obj, tuple) and hasattr(obj, "_fields"))


def _plain(obj):
    """Dataclass instances become dicts of their fields, and containers pytree does not know (subclasses
    of dict, list, tuple) plain ones with their attributes beside their items, so pytree opens them all."""
    if dataclasses.is_dataclass(obj) and not isinstance(obj, type):
        return {f.name: _plain(getattr(obj, f.name)) for f in dataclasses.fields(obj)}
    if isinstance(obj, dict):
        items = {k: _plain(v) for k, v in obj.items()}
        if isinstance(obj, collections.defaultdict):
            return collections.defaultdict(obj.default_factory, items)
        if _known(obj):
            return type(obj)(items) if type(obj) is not dict else items
        extra = {name: _plain(value) for name, value in (_attributes(obj) or {}).items() if name not in items}
        return {**items, **extra}
    if isinstance(obj, (list, tuple)) and not hasattr(obj, "_fields"):
        items = [_plain(x) for x in obj]
        if _known(obj):
            return type(obj)(items)
        extra = _attributes(obj)
        return {**dict(enumerate(items)), **{n: _plain(v) for n, v in extra.items()}} if extra else items
    return obj


def _attributes(obj) -> dict | None:
    """An object's data attributes by name, or None when it has none to compare."""
    found = dict(vars(obj)) if hasattr(obj, "__dict__") else {}
    for name in getattr(type(obj), "__slots__", ()):
        if hasattr(obj, name):
            found[name] = getattr(obj, name)
    found = {name: value for name, value in found.items()
             if not name.startswith("__") and (isinstance(value, VALUES) or not callable(value))}
    return found or None


def _name(path) -> str:
    parts = []
    for key in path:
        if isinstance(key, pytree.MappingKey):
            parts.append(str(key.key))
        elif isinstance(key, pytree.SequenceKey):
            parts.append(str(key.idx))
        elif isinstance(key, pytree.GetAttrKey):
            parts.append(key.name)
        else:
            parts.append(str(key))
    return ".".join(parts) or "output"


def flatten(outputs, _depth: int = 0) -> tuple[list[tuple[str, object]], object]:
    """(name, leaf) pairs and the tree structure; an object pytree does not know is opened up into its
    attributes, named `output.attribute`."""
    with_path, spec = pytree.tree_flatten_with_path(_plain(outputs))
    pairs = []
    for path, leaf in with_path:
        name = _name(path)
        held = None if isinstance(leaf, VALUES) or _depth >= _MAX_DEPTH else _attributes(leaf)
        if held is None:
            pairs.append((name, leaf))
            continue
        inner, _ = flatten(held, _depth + 1)
        pairs += [(f"{name}.{part}" if part != "output" else name, value) for part, value in inner]
    return pairs, spec


def graph_output(leaf) -> bool:
    """Whether a graph (ONNX) can return this leaf: a tensor or a number, not None, a string or a device."""
    return isinstance(leaf, (torch.Tensor, np.ndarray, np.generic, float, complex)) or (
        isinstance(leaf, int) and not isinstance(leaf, bool))


def to_tensor(value) -> torch.Tensor | None:
    """A leaf as a dense, strided CPU tensor of plain values, or None when it is no tensor or number."""
    if isinstance(value, torch.Tensor):
        value = value.detach().cpu()
        if value.layout != torch.strided:  # sparse COO/CSR and friends: compared by their values
            value = value.to_dense()
        if value.is_quantized:
            value = value.dequantize()
        return value.resolve_conj().resolve_neg()
    if isinstance(value, np.ndarray):  # a copy keeps a 0-d array 0-d (np.ascontiguousarray makes it 1-d)
        return torch.from_numpy(np.array(value, copy=True, order="C"))
    if isinstance(value, (bool, int, float, complex, np.generic)):
        return torch.tensor(value)
    return None


def paired(expected_leaves, expected_spec, actual, flat: bool):
    """Eager's leaves to compare, with their index into all of eager's (for the noise and fp64 runs); the
    artifact's leaves; and how their structures differ. A flat graph returns only tensors and numbers:
    eager's other leaves are left out, and the note says so."""
    indexed = list(enumerate(expected_leaves))
    if not flat:
        pairs, actual_spec = flatten(actual)
        same = actual_spec == expected_spec and [n for n, _ in pairs] == [n for n, _ in expected_leaves]
        return indexed, [leaf for _, leaf in pairs], None if same else "output structure differs from eager"
    actual_leaves = list(actual) if isinstance(actual, (list, tuple)) else [actual]
    left_out = [f"{name} ({type(leaf).__name__})" for name, leaf in expected_leaves if not graph_output(leaf)]
    if not left_out:
        return indexed, actual_leaves, None
    shown = ", ".join(left_out[:4]) + (", ..." if len(left_out) > 4 else "")
    return ([(i, pair) for i, pair in indexed if graph_output(pair[1])], actual_leaves,
            f"eager's output{'s' if len(left_out) > 1 else ''} {shown} left out: a graph returns only tensors and "
            "numbers")


def complex_pairs(expected: torch.Tensor, actual):
    """A graph's real tensor of shape [..., 2] for eager's complex one, as that complex tensor."""
    got = to_tensor(actual)
    if (expected.is_complex() and got is not None and not got.is_complex() and got.is_floating_point()
            and list(got.shape) == [*expected.shape, 2]):
        return torch.view_as_complex(got.to(torch.float64 if expected.dtype == torch.complex128 else torch.float32)
                                     .contiguous()), True
    return actual, False


def number_dtype(value) -> torch.dtype:
    """The dtype a Python number most likely came from: a float exactly representable in float32 is a
    float32 `.item()` (a float64 computation lands on one with odds near 2**-29), else float64."""
    if isinstance(value, bool):
        return torch.bool
    if isinstance(value, int):
        return torch.int64
    if isinstance(value, complex):
        return torch.complex64 if complex(np.complex64(value)) == value else torch.complex128
    return torch.float32 if not np.isfinite(value) or float(np.float32(value)) == value else torch.float64
