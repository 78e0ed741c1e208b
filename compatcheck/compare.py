"""Compare a stage's outputs with eager's: structure, shapes, dtypes, then closeness per leaf.

Knows nothing about stages. The rules, in order:
1. Outputs are flattened with torch's pytree (dataclasses are flattened by field); a different
   container type with the same leaves is noted, a different number of leaves is a mismatch.
2. Shapes and dtypes must match exactly; integer and bool leaves must be equal.
3. Float leaves must be close: |actual - expected| <= atol + rtol * |expected|, NaN where eager
   has NaN and infinities equal. Tolerances: per-output TOLERANCE > --atol/--rtol > TOLERANCE >
   the dtype's default.
4. A float leaf that is not close is adjudicated against an fp64 eager run (as PyTorch's own
   accuracy checks do): if its RMS error to fp64 is at most twice eager's own, it is noise.
5. If eager disagrees with itself, differences up to that disagreement are noise too.
"""

from __future__ import annotations

import dataclasses
from dataclasses import dataclass

import numpy as np
import torch
from torch.utils import _pytree as pytree

from compatcheck.report.model import LeafComparison

# (atol, rtol) per dtype; looser than torch.testing's, which are meant for kernels, not whole models.
DEFAULT_TOLERANCES = {
    torch.float64: (1e-7, 1e-7),
    torch.float32: (1e-5, 1e-4),
    torch.float16: (1e-3, 1e-3),
    torch.bfloat16: (1e-2, 1.6e-2),
    torch.complex64: (1e-5, 1e-4),
    torch.complex128: (1e-7, 1e-7),
}
FP64_MULTIPLIER = 2.0


@dataclass
class Tolerances:
    """Resolves the tolerance of one output leaf."""

    cli_atol: float | None = None
    cli_rtol: float | None = None
    model: dict = dataclasses.field(default_factory=dict)

    def resolve(self, name: str, dtype: torch.dtype) -> tuple[float, float]:
        atol, rtol = DEFAULT_TOLERANCES.get(dtype, (0.0, 0.0))
        atol = self.model.get("atol", atol)
        rtol = self.model.get("rtol", rtol)
        atol = atol if self.cli_atol is None else self.cli_atol
        rtol = rtol if self.cli_rtol is None else self.cli_rtol
        per_output = self.model.get(name)
        if isinstance(per_output, dict):
            atol = per_output.get("atol", atol)
            rtol = per_output.get("rtol", rtol)
        return float(atol), float(rtol)


def _plain(obj):
    """Dataclass instances become dicts of their fields so pytree can flatten them."""
    if dataclasses.is_dataclass(obj) and not isinstance(obj, type):
        return {f.name: _plain(getattr(obj, f.name)) for f in dataclasses.fields(obj)}
    if isinstance(obj, (list, tuple)) and not hasattr(obj, "_fields"):
        return type(obj)(_plain(x) for x in obj)
    if isinstance(obj, dict):
        return type(obj)((k, _plain(v)) for k, v in obj.items())
    return obj


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


def flatten(outputs) -> tuple[list[tuple[str, object]], object]:
    """(name, leaf) pairs and the tree structure."""
    with_path, spec = pytree.tree_flatten_with_path(_plain(outputs))
    return [(_name(path), leaf) for path, leaf in with_path], spec


def to_tensor(value) -> torch.Tensor | None:
    if isinstance(value, torch.Tensor):
        return value.detach().cpu()
    if isinstance(value, np.ndarray):
        return torch.from_numpy(np.ascontiguousarray(value))
    if isinstance(value, (bool, int, float, np.generic)):
        return torch.tensor(value)
    return None


def _numpy64(t: torch.Tensor) -> np.ndarray:
    if t.is_complex():
        return t.to(torch.complex128).numpy()
    return t.to(torch.float64).numpy()


def _rmse(a: np.ndarray, b: np.ndarray) -> float:
    finite = np.isfinite(a) & np.isfinite(b)
    if not finite.any():
        return 0.0
    return float(np.sqrt(np.mean(np.abs(a[finite] - b[finite]) ** 2)))


def compare_leaf(
    name: str,
    expected: torch.Tensor,
    actual,
    atol: float,
    rtol: float,
    *,
    noise: torch.Tensor | None = None,
    fp64=None,
) -> LeafComparison:
    """`fp64`: a callable giving this leaf's fp64 eager value, asked only when the values are off."""
    result = LeafComparison(
        output=name, shape=list(expected.shape), dtype=str(expected.dtype).replace("torch.", ""),
        ok=False, atol=atol, rtol=rtol,
    )
    actual_t = to_tensor(actual)
    if actual_t is None:
        result.problem = f"got {type(actual).__name__}, expected a tensor"
        return result
    if tuple(actual_t.shape) != tuple(expected.shape):
        result.problem = f"shape {list(actual_t.shape)}, expected {list(expected.shape)}"
        return result
    if actual_t.dtype != expected.dtype:
        result.problem = f"dtype {str(actual_t.dtype).replace('torch.', '')}, expected {result.dtype}"
        return result
    if expected.numel() == 0:
        result.ok = True
        return result

    if not (expected.is_floating_point() or expected.is_complex()):
        equal = (actual_t == expected).numpy()
        off = ~equal
        result.mismatched_fraction = float(off.mean())
        result.max_abs_error = float(
            (actual_t.to(torch.float64) - expected.to(torch.float64)).abs().max()
        ) if expected.dtype != torch.bool else float(off.any())
        result.max_rel_error = None
        result.ok = not off.any()
        if off.any():
            result.worst_index = [int(i) for i in np.unravel_index(int(np.argmax(off)), off.shape)]
            result.problem = f"{int(off.sum())} of {off.size} values differ (exact match required)"
        return result

    e, a = _numpy64(expected), _numpy64(actual_t)
    e_nan, a_nan = np.isnan(e), np.isnan(a)
    both_finite = np.isfinite(e) & np.isfinite(a)
    with np.errstate(invalid="ignore", over="ignore"):
        diff = np.where(both_finite, np.abs(a - e), 0.0)
    magnitude = np.abs(e)
    allowed = atol + rtol * magnitude
    if noise is not None:
        allowed = np.maximum(allowed, np.abs(_numpy64(noise) - e) * 2)
    # Special values must agree exactly: NaN with NaN, inf with the same inf.
    special_off = (e_nan != a_nan) | (~both_finite & ~(e_nan & a_nan) & (e != a))
    off = special_off | (diff > allowed)

    result.max_abs_error = float(diff.max())
    with np.errstate(divide="ignore", invalid="ignore"):
        rel = np.where(both_finite & (magnitude > 0), diff / magnitude, 0.0)
    result.max_rel_error = float(rel.max())
    result.mismatched_fraction = float(off.mean())
    if not special_off.any():
        result.required_atol = float(np.max(np.maximum(diff - rtol * magnitude, 0.0)))
        with np.errstate(divide="ignore", invalid="ignore"):
            need = np.where(magnitude > 0, (diff - atol) / magnitude, np.where(diff > atol, np.inf, 0.0))
        result.required_rtol = float(max(np.max(need), 0.0))
    if not off.any():
        result.ok = True
        return result

    worst = np.where(special_off, np.inf, diff - allowed)
    result.worst_index = [int(i) for i in np.unravel_index(int(np.argmax(worst)), worst.shape)]
    if special_off.any():
        result.problem = f"{int(special_off.sum())} NaN/Inf values where eager has none or other ones"
        return result
    truth_t = fp64() if fp64 is not None else None
    if truth_t is not None:
        truth = _numpy64(truth_t)
        eager_error, stage_error = _rmse(truth, e), _rmse(truth, a)
        if stage_error <= FP64_MULTIPLIER * eager_error + atol / 10:
            result.ok = True
            result.fp64_verdict = "within-noise"
            return result
        result.fp64_verdict = f"rms error to fp64 {stage_error:.3g} vs eager's {eager_error:.3g}"
    result.problem = (
        f"{result.mismatched_fraction:.1%} of values off; max abs error {result.max_abs_error:.3g} "
        f"at {tuple(result.worst_index)} (atol {atol:g}, rtol {rtol:g})"
    )
    return result


def compare_outputs(
    expected,
    actual,
    tolerances: Tolerances,
    *,
    flat: bool = False,
    noise=None,
    fp64=None,
) -> tuple[list[LeafComparison], str | None]:
    """Compare one input set's outputs. `flat`: `actual` is a flat list of leaves (ONNX outputs).

    `fp64` is a callable returning the fp64 eager outputs, called only when a leaf is off.
    Returns the per-leaf comparisons and a structure problem or note (None when identical).
    """
    expected_leaves, expected_spec = flatten(expected)
    if flat:
        actual_leaves = list(actual) if isinstance(actual, (list, tuple)) else [actual]
        note = None
        nones = [name for name, leaf in expected_leaves if leaf is None]
        if nones:  # a graph has no None outputs: the exporter leaves them out
            expected_leaves = [(name, leaf) for name, leaf in expected_leaves if leaf is not None]
            note = f"eager's None output{'s' if len(nones) > 1 else ''} {', '.join(nones)} left out: a graph has none"
    else:
        pairs, actual_spec = flatten(actual)
        actual_leaves = [leaf for _, leaf in pairs]
        note = None if actual_spec == expected_spec else "output structure differs from eager"
    if len(actual_leaves) != len(expected_leaves):
        return [], f"{len(actual_leaves)} outputs, eager returns {len(expected_leaves)}"
    noise_leaves = [leaf for _, leaf in flatten(noise)[0]] if noise is not None else None
    fp64_leaves: list = []

    def fp64_leaf(index: int):
        if fp64 is None:
            return None
        if not fp64_leaves:
            fp64_out = fp64()
            fp64_leaves.append([leaf for _, leaf in flatten(fp64_out)[0]] if fp64_out is not None else [])
        leaves = fp64_leaves[0]
        return to_tensor(leaves[index]) if index < len(leaves) else None

    results = []
    for index, ((name, want), got) in enumerate(zip(expected_leaves, actual_leaves)):
        want_t = to_tensor(want)
        if want_t is None:
            same = want == got
            results.append(LeafComparison(output=name, ok=same, problem=None if same else f"{got!r}, expected {want!r}"))
            continue
        atol, rtol = tolerances.resolve(name, want_t.dtype)
        leaf_noise = to_tensor(noise_leaves[index]) if noise_leaves else None
        results.append(
            compare_leaf(name, want_t, got, atol, rtol, noise=leaf_noise, fp64=lambda i=index: fp64_leaf(i))
        )
    return results, note
