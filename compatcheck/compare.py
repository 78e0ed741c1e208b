"""Compare a stage's outputs with eager's: structure, shapes, dtypes, then closeness per leaf.

Knows nothing about stages. The rules, in order:
1. Outputs are flattened with torch's pytree (dataclasses by field; an object pytree does not know,
   such as a library's cache, by the attributes it holds, so it is compared by the tensors inside it,
   never by `==`); a different container type with the same leaves is noted, a different number of
   leaves is a mismatch. Against a graph's flat outputs (ONNX), only the tensors and numbers count:
   a graph has no None, string or device outputs, and returns a complex tensor as (real, imag) pairs.
2. Shapes and dtypes must match exactly; integer and bool leaves must be equal. A Python number
   is compared by value with a 0-d tensor.
3. Float leaves must be close: |actual - expected| <= atol + rtol * |expected|, NaN where eager
   has NaN and infinities equal. Tolerances: per-output TOLERANCE > --atol/--rtol > TOLERANCE >
   the dtype's default. A tolerance the user set is a bound: rules 4 and 5 never cross it.
4. Element by element against an fp64 eager run (asked only where the artifact and eager disagree by
   more than rtol and a few rounding steps): the artifact is as right as eager at an element when its
   distance to float64 is within rtol of the value plus twice eager's own largest distance at values
   no larger than it (atol joins that floor only where eager is that far off). An element off the
   tolerance passes only so, and only where eager itself is within 10x the tolerance of float64 (else
   the model is unstable there, or float64 took another path); an element within the tolerance fails
   where the artifact has lost digits eager keeps. Without a float64 run the tolerance is final.
5. If eager disagrees with itself (two identical calls on pristine copies), differences up to that
   disagreement are noise too; state a call leaves behind is not.
6. With --dtype float16 or bfloat16, every float leaf, eager's own included, is judged against the float64
   run instead (the model as cast, in float64): faithful when its RMS error to it is at most twice that of
   eager in the same dtype plus atol/10, and NaN/Inf only where the float64 run has them. How far it
   moved from the model's float32 answers is measured, not judged (docs/precision.md).
"""

from __future__ import annotations

import dataclasses
import enum
import math
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

    def binding(self, name: str) -> bool:
        """Whether the user set this output's tolerance (--atol/--rtol or TOLERANCE): then it is a bound that
        no float64 run widens or narrows."""
        return (self.cli_atol is not None or self.cli_rtol is not None or "atol" in self.model
                or "rtol" in self.model or isinstance(self.model.get(name), dict))


def _plain(obj):
    """Dataclass instances become dicts of their fields so pytree can flatten them."""
    if dataclasses.is_dataclass(obj) and not isinstance(obj, type):
        return {f.name: _plain(getattr(obj, f.name)) for f in dataclasses.fields(obj)}
    if isinstance(obj, (list, tuple)) and not hasattr(obj, "_fields"):
        return type(obj)(_plain(x) for x in obj)
    if isinstance(obj, dict):
        return type(obj)((k, _plain(v)) for k, v in obj.items())
    return obj


# Leaves compared as values; any other object pytree leaves whole is compared by what it holds.
VALUES = (torch.Tensor, np.ndarray, np.generic, bool, int, float, complex, str, bytes, type(None), torch.dtype,
           torch.device, enum.Enum)
_MAX_DEPTH = 8  # objects inside objects: a cache of layers of tensors is three deep


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


def _graph_output(leaf) -> bool:
    """Whether a graph (ONNX) can return this leaf: a tensor or a number, not None, a string or a device."""
    return isinstance(leaf, (torch.Tensor, np.ndarray, np.generic, float, complex)) or (
        isinstance(leaf, int) and not isinstance(leaf, bool))


def to_tensor(value) -> torch.Tensor | None:
    if isinstance(value, torch.Tensor):
        return value.detach().cpu()
    if isinstance(value, np.ndarray):  # a copy keeps a 0-d array 0-d (np.ascontiguousarray makes it 1-d)
        return torch.from_numpy(np.array(value, copy=True, order="C"))
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
    values: bool = True,
    float32=None,
    binding: bool = False,
) -> LeafComparison:
    """`fp64`: a callable giving this leaf's fp64 eager value (or the exception that kept the model from
    running in float64), asked only when the values are off;
    `values=False` checks the type, shape and dtype only; `binding`: the tolerance is the user's own, a bound
    no float64 run widens;
    `float32`: with --dtype, a callable giving this leaf's float32 answer: the leaf is then judged by the
    reduced-precision rule, which asks `fp64` always."""
    result = LeafComparison(
        output=name, shape=list(expected.shape), dtype=str(expected.dtype).replace("torch.", ""),
        ok=False, atol=atol, rtol=rtol,
    )
    actual_t = to_tensor(actual)
    result.problem = _kind_problem(expected, actual, actual_t, result.dtype)
    if result.problem:
        return result
    if expected.numel() == 0 or not values:
        result.ok = True
        return result
    if not (expected.is_floating_point() or expected.is_complex()):
        return _exact(result, expected, actual_t)
    e, a, diff, allowed, special_off, close = _measured(result, expected, actual_t, noise)
    if float32 is not None:
        result.mismatched_fraction = float((~close).mean())
        return _reduced(result, e, a, fp64() if fp64 is not None else None, float32(), atol)
    if special_off.any():
        result = _off(result, special_off, np.where(special_off, 1.0, 0.0), "")
        result.problem = _special_problem(e, a, special_off)
        return result
    # Where eager and the artifact agree to rtol (and a few rounding steps), no float64 run can say more.
    eps, tiny = _rounding(expected.dtype)
    magnitude = np.abs(e)
    resolution = ROUNDING_STEPS * eps * magnitude + tiny
    if binding or fp64 is None or not (~close | (diff > rtol * magnitude + resolution)).any():
        return _off(result, ~close, diff - allowed, _tolerance_problem(atol, rtol, binding)) if (~close).any() \
            else _ok(result)
    truth_t = fp64()
    truth = _numpy64(to_tensor(truth_t)) if isinstance(truth_t, torch.Tensor) else None
    if truth is None or truth.shape != e.shape:
        why = _why(truth_t) if isinstance(truth_t, BaseException) else "it has no such output"
        result.fp64_verdict = f"no float64 run to judge it by: {why}"
        return _off(result, ~close, diff - allowed, _tolerance_problem(atol, rtol, False)) if (~close).any() \
            else _ok(result)
    return _adjudicated(result, e, a, truth, close, atol, rtol, eps)


def _special_problem(e: np.ndarray, a: np.ndarray, off: np.ndarray) -> str:
    """Which side has the NaN or Inf values the other has not, in words."""
    artifact = int((off & ~np.isfinite(a) & np.isfinite(e)).sum())
    eager = int((off & ~np.isfinite(e) & np.isfinite(a)).sum())
    other = int(off.sum()) - artifact - eager
    said = [f"{count} {where}" for count, where in ((artifact, "NaN/Inf values in the artifact where eager's are finite"),
                                                   (eager, "NaN/Inf values in eager where the artifact's are finite"),
                                                   (other, "NaN/Inf values that differ between the two"))
            if count]
    return "; ".join(said)


def _kind_problem(expected: torch.Tensor, actual, actual_t, dtype: str) -> str | None:
    """What keeps `actual` from being compared with `expected` value by value: its type, shape or dtype."""
    if actual_t is None:
        return f"got {type(actual).__name__}, expected a tensor"
    if tuple(actual_t.shape) != tuple(expected.shape):
        return f"shape {list(actual_t.shape)}, expected {list(expected.shape)}"
    if actual_t.dtype != expected.dtype:
        return f"dtype {str(actual_t.dtype).replace('torch.', '')}, expected {dtype}"
    return None


def _exact(result: LeafComparison, expected: torch.Tensor, actual_t: torch.Tensor) -> LeafComparison:
    """An integer or boolean output: every value must be eager's."""
    off = ~(actual_t == expected).numpy()
    result.mismatched_fraction = float(off.mean())
    result.max_abs_error = float(
        (actual_t.to(torch.float64) - expected.to(torch.float64)).abs().max()
    ) if expected.dtype != torch.bool else float(off.any())
    result.max_rel_error = None
    result.ok = not off.any()
    if off.any():
        result.worst_index = [int(i) for i in np.unravel_index(int(np.argmax(off)), off.shape)]
        result.problem = (f"{int(off.sum())} of {off.size} values differ, first at {tuple(result.worst_index)} "
                          "(exact match required)")
    return result


def _measured(result: LeafComparison, expected: torch.Tensor, actual_t: torch.Tensor, noise):
    """A floating output's differences from eager, element by element, into `result`'s error fields; and
    (eager's values, the artifact's, the differences, what the tolerance allows, where a NaN or an inf
    disagrees, where they are close)."""
    atol, rtol = result.atol, result.rtol
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
    close = ~special_off & (~both_finite | (diff <= allowed))
    result.max_abs_error = float(diff.max())
    with np.errstate(divide="ignore", invalid="ignore"):
        rel = np.where(both_finite & (magnitude > 0), diff / magnitude, 0.0)
    result.max_rel_error = float(rel.max())
    if not special_off.any():
        result.required_atol = float(np.max(np.maximum(diff - rtol * magnitude, 0.0)))
        with np.errstate(divide="ignore", invalid="ignore"):
            need = np.where(magnitude > 0, (diff - atol) / magnitude, np.where(diff > atol, np.inf, 0.0))
        result.required_rtol = float(max(np.max(need), 0.0))
    return e, a, diff, allowed, special_off, close


ROUNDING_STEPS = 4  # rounding steps of the output's dtype at an element's size that are never a difference
# Eager farther from float64 than this many times the tolerance has lost the digits the tolerance asks for
# there (the model is numerically unstable, or the float64 run took another path): it lends no pass.
EAGER_FAR = 10.0


def _adjudicated(result: LeafComparison, e: np.ndarray, a: np.ndarray, truth: np.ndarray, close: np.ndarray,
                 atol: float, rtol: float, eps: float) -> LeafComparison:
    """Rule 4, element by element: the artifact is as right as eager when its distance to the float64 run is
    within rtol of the value plus twice the largest distance eager itself has at values no larger than it
    (atol joins that floor only where eager is that far off). An element off the tolerance passes only so,
    and only where eager is near float64; an element within it fails where the artifact has lost what eager
    keeps."""
    finite = np.isfinite(truth)
    size = np.abs(np.where(finite, truth, 0.0))
    eager_error = np.where(finite, np.abs(e - np.where(finite, truth, 0.0)), np.inf)
    stage_error = np.abs(a - np.where(finite, truth, 0.0))
    local = _local_error(size, np.where(finite, eager_error, 0.0), atol)
    floor = np.where(local >= atol, atol, 0.0) + ROUNDING_STEPS * eps * size
    faithful = finite & (stage_error <= rtol * size + FP64_MULTIPLIER * local + floor)
    # Within the tolerance, a rounding step at the output's own scale is below what its dtype resolves there.
    scale = float(np.sqrt(np.mean(size[finite] ** 2))) if finite.any() else 0.0
    kept = faithful | (stage_error <= rtol * size + FP64_MULTIPLIER * local + floor + ROUNDING_STEPS * eps * scale)
    eager_near = eager_error <= EAGER_FAR * (atol + rtol * size)
    ok = np.where(close, kept | ~eager_near, faithful & eager_near)
    if ok.all():
        if (~close).any():
            result.fp64_verdict = "within-noise"
        return _ok(result)
    bad = ~ok
    worst = np.where(bad, stage_error - (rtol * size + FP64_MULTIPLIER * local), -np.inf)
    at, why = _why_off(result, bad & eager_near & ~close, bad & close, bad & ~eager_near, worst, stage_error,
                       eager_error, truth)
    why = f"{_tolerance_problem(atol, rtol, False)}: {why}"
    result = _off(result, bad, worst, why)
    result.worst_index = [int(i) for i in at]
    result.problem = _located(result, why)
    return result


def _why_off(result: LeafComparison, diverged, lost, far, worst, stage_error, eager_error, truth):
    """(the element to name, the rule that failed it, in words), most telling first: off the tolerance and
    farther from float64 than eager; within it but without the digits eager keeps; off it where eager itself
    is far from float64. Sets the leaf's fp64_verdict."""
    def where(mask, rank):
        return np.unravel_index(int(np.argmax(np.where(mask, rank, -np.inf))), mask.shape)

    if diverged.any() or not lost.any():
        if diverged.any():
            at = where(diverged, worst)
            result.fp64_verdict = (f"{float(stage_error[at]):.3g} from float64 at {tuple(int(i) for i in at)}, "
                                   f"where eager is {float(eager_error[at]):.3g}")
            return at, result.fp64_verdict
        at = where(far, eager_error)
        result.fp64_verdict = (f"eager itself is {float(eager_error[at]):.3g} from float64 at "
                               f"{tuple(int(i) for i in at)}: numerically unstable there, or float64 takes another path")
        return at, f"{result.fp64_verdict}, so float64 cannot call it noise"
    at = where(lost, stage_error)
    result.fp64_verdict = (f"{int(lost.sum())} values within the tolerance but {float(stage_error[at]):.3g} from "
                           f"float64 where eager is {float(eager_error[at]):.3g}")
    return at, (f"within it, but {float(stage_error[at]):.3g} from float64 where eager is "
                f"{float(eager_error[at]):.3g} (value {float(truth[at]):.3g}): the artifact loses digits eager keeps")


def _rounding(dtype: torch.dtype) -> tuple[float, float]:
    """The rounding step at 1 and the smallest normal number of a float or complex dtype: below the latter
    a backend may flush to zero."""
    info = torch.finfo(dtype.to_real() if dtype.is_complex else dtype)
    return info.eps, info.tiny


def _local_error(size: np.ndarray, error: np.ndarray, atol: float) -> np.ndarray:
    """Per element, the largest `error` at any element whose `size` is at most twice its own plus atol (values
    within atol of zero are one scale): eager's own distance from float64 among values no larger than this
    one, so a large value's noise never covers a small one."""
    order = np.argsort(size, axis=None, kind="stable")
    sizes = size.ravel()[order]
    running = np.maximum.accumulate(error.ravel()[order])
    upto = np.searchsorted(sizes, 2 * size.ravel() + atol, side="right") - 1
    return np.maximum(running[np.maximum(upto, 0)].reshape(size.shape), error)


def _why(exc: BaseException) -> str:
    return str(exc).strip().splitlines()[0][:160] if str(exc).strip() else type(exc).__name__


def _tolerance_problem(atol: float, rtol: float, binding: bool) -> str:
    return f"(atol {atol:g}, rtol {rtol:g}{', your tolerance: a bound no float64 run widens' if binding else ''})"


def _ok(result: LeafComparison) -> LeafComparison:
    result.ok, result.mismatched_fraction = True, 0.0
    return result


def _off(result: LeafComparison, off: np.ndarray, worst: np.ndarray, why: str) -> LeafComparison:
    """The leaf fails at the elements `off`; `worst` ranks them, `why` says by which rule."""
    result.ok = False
    result.mismatched_fraction = float(off.mean())
    result.worst_index = [int(i) for i in np.unravel_index(int(np.argmax(np.where(off, worst, -np.inf))), off.shape)]
    result.problem = _located(result, why)
    return result


def _located(result: LeafComparison, why: str) -> str:
    return (f"{result.mismatched_fraction:.1%} of values off; max abs error {result.max_abs_error:.3g} "
            f"at {tuple(result.worst_index)} {why}")


def _reduced(result: LeafComparison, e: np.ndarray, a: np.ndarray, truth_t, float32_t, atol: float) -> LeafComparison:
    """The reduced-precision rule (rule 6): `a` against the float64 run `truth_t`, within what eager in the
    same dtype (`e`) makes there; where the model refuses float64, the float32 answers stand in for it."""
    f = _numpy64(to_tensor(float32_t)) if isinstance(float32_t, torch.Tensor) else None
    if f is not None and f.shape == a.shape:
        finite = np.isfinite(f) & np.isfinite(a)
        result.float32_error = float(np.max(np.abs(a[finite] - f[finite]))) if finite.any() else None
    truth, instead = (_numpy64(to_tensor(truth_t)), "the float64 run") if isinstance(truth_t, torch.Tensor) else (f, None)
    if truth is None or truth.shape != a.shape:
        result.ok = False
        result.problem = "no float64 or float32 run of the model to judge its reduced precision by"
        return result
    if instead is None:
        why = (str(truth_t).strip().splitlines() or [type(truth_t).__name__])[0][:160] \
            if isinstance(truth_t, BaseException) else "it has no such output"
        instead = f"the float32 answers (no float64 run: {why})"
    both_nan = np.isnan(a) & np.isnan(truth)
    special = ~both_nan & ((np.isfinite(truth) != np.isfinite(a)) | (~np.isfinite(truth) & (a != truth)))
    result.fp64_error, result.eager_fp64_error = _rmse(truth, a), _rmse(truth, e)
    allowed = FP64_MULTIPLIER * result.eager_fp64_error + atol / 10
    if special.any():
        result.ok = False
        result.worst_index = [int(i) for i in np.unravel_index(int(np.argmax(special)), special.shape)]
        result.problem = (f"{int(special.sum())} of {special.size} values NaN/Inf where {instead} has finite ones "
                          f"(first at {tuple(result.worst_index)}): the model leaves {result.dtype}'s range")
        return result
    result.ok = result.fp64_error <= allowed
    result.fp64_verdict = (f"{result.dtype} rule: rms error to {instead} {result.fp64_error:.3g} "
                           f"{'within' if result.ok else 'beyond'} {FP64_MULTIPLIER:g} × eager {result.dtype}'s "
                           f"{result.eager_fp64_error:.3g} + atol/10 = {allowed:.3g}")
    if not result.ok:
        result.problem = (f"rms error to {instead} {result.fp64_error:.3g}, beyond {FP64_MULTIPLIER:g} × that of eager "
                          f"in {result.dtype} ({result.eager_fp64_error:.3g}) + atol/10: {allowed:.3g}")
    return result


def compare_outputs(
    expected,
    actual,
    tolerances: Tolerances,
    *,
    flat: bool = False,
    noise=None,
    fp64=None,
    values: bool | set[int] = True,
    float32=None,
    drawn: set[int] = frozenset(),
) -> tuple[list[LeafComparison], str | None]:
    """Compare one input set's outputs. `flat`: `actual` is a flat list of leaves (ONNX outputs).

    `fp64` is a callable returning the fp64 eager outputs, called only when a leaf is off. `values=False`
    compares structure, shapes and dtypes only (outputs that are random by design); a set of eager's leaf
    indices does so for those leaves alone. `drawn`: eager's leaf indices made of random draws, compared
    without the fp64 run (which draws other numbers). `float32`, with
    --dtype, is a callable returning the float32 answers: float leaves are judged by the reduced-precision
    rule (rule 6), against the fp64 outputs.
    Returns the per-leaf comparisons and a structure problem or note (None when identical).
    """
    expected_leaves, expected_spec = flatten(expected)
    indexed, actual_leaves, note = _paired(expected_leaves, expected_spec, actual, flat)
    if len(actual_leaves) != len(indexed):
        return [], f"{len(actual_leaves)} outputs, eager returns {len(indexed)}"
    noise_leaves = [leaf for _, leaf in flatten(noise)[0]] if noise is not None else None
    fp64_leaf, float32_leaf = _leaf_of(fp64), _leaf_of(float32)

    results = []
    for (index, (name, want)), got in zip(indexed, actual_leaves):
        if isinstance(want, (bool, int, float)):
            results.append(_compare_number(name, want, got, tolerances))
            continue
        want_t = to_tensor(want)
        if want_t is None:
            same = type(want) is type(got) and (not isinstance(want, VALUES) or want == got)
            results.append(LeafComparison(output=name, ok=same, problem=None if same else f"{got!r}, expected {want!r}"))
            continue
        atol, rtol = tolerances.resolve(name, want_t.dtype)
        got_t, paired = _complex_pairs(want_t, got) if flat else (got, False)
        leaf_noise = to_tensor(noise_leaves[index]) if noise_leaves else None
        judged = float32 is not None and want_t.is_floating_point()
        by_value = values if isinstance(values, bool) else index not in values
        result = compare_leaf(name, want_t, got_t, atol, rtol, noise=leaf_noise,
                              fp64=None if index in drawn else lambda i=index: fp64_leaf(i),
                              values=by_value, float32=(lambda i=index: float32_leaf(i)) if judged else None,
                              binding=tolerances.binding(name))
        if paired:
            result.note = "a complex output, returned by the graph as (real, imaginary) pairs in a last dimension of 2"
        results.append(result)
    return results, note


def _paired(expected_leaves, expected_spec, actual, flat: bool):
    """Eager's leaves to compare, with their index into all of eager's (for the noise and fp64 runs); the
    artifact's leaves; and how their structures differ. A flat graph returns only tensors and numbers:
    eager's other leaves are left out, and the note says so."""
    indexed = list(enumerate(expected_leaves))
    if not flat:
        pairs, actual_spec = flatten(actual)
        same = actual_spec == expected_spec and [n for n, _ in pairs] == [n for n, _ in expected_leaves]
        return indexed, [leaf for _, leaf in pairs], None if same else "output structure differs from eager"
    actual_leaves = list(actual) if isinstance(actual, (list, tuple)) else [actual]
    left_out = [f"{name} ({type(leaf).__name__})" for name, leaf in expected_leaves if not _graph_output(leaf)]
    if not left_out:
        return indexed, actual_leaves, None
    shown = ", ".join(left_out[:4]) + (", ..." if len(left_out) > 4 else "")
    return ([(i, pair) for i, pair in indexed if _graph_output(pair[1])], actual_leaves,
            f"eager's output{'s' if len(left_out) > 1 else ''} {shown} left out: a graph returns only tensors and "
            "numbers")


def _leaf_of(run):
    """index -> that leaf of the outputs `run()` gives (asked once, on first use), the exception `run()`
    gave instead (why there is no such run), or None without `run`."""
    leaves: list = []

    def leaf(index: int):
        if run is None:
            return None
        if not leaves:
            outputs = run()
            leaves.append(outputs if isinstance(outputs, BaseException) else
                          [one for _, one in flatten(outputs)[0]] if outputs is not None else [])
        found = leaves[0]
        if isinstance(found, BaseException):
            return found
        return to_tensor(found[index]) if index < len(found) else None

    return leaf


def _complex_pairs(expected: torch.Tensor, actual):
    """A graph's real tensor of shape [..., 2] for eager's complex one, as that complex tensor."""
    got = to_tensor(actual)
    if (expected.is_complex() and got is not None and not got.is_complex() and got.is_floating_point()
            and list(got.shape) == [*expected.shape, 2]):
        return torch.view_as_complex(got.to(torch.float64 if expected.dtype == torch.complex128 else torch.float32)
                                     .contiguous()), True
    return actual, False


def _compare_number(name: str, want, got, tolerances: Tolerances) -> LeafComparison:
    """A Python number from eager, against a number or a 0-d tensor: by value."""
    result = LeafComparison(output=name, shape=[], dtype=type(want).__name__, ok=False)
    if isinstance(got, (torch.Tensor, np.ndarray, np.generic)):
        if np.size(got) != 1 or np.ndim(got) > 0:
            result.problem = f"shape {list(np.shape(got))}, expected the number {want!r}"
            return result
        got = got.item()
    value = got
    if not isinstance(value, (bool, int, float)):
        result.problem = f"got {type(got).__name__}, expected the number {want!r}"
        return result
    if isinstance(want, float):
        atol, rtol = tolerances.resolve(name, torch.float64)
        result.atol, result.rtol = atol, rtol
        result.max_abs_error = abs(float(value) - want)
        result.ok = math.isclose(value, want, rel_tol=rtol, abs_tol=atol) or (math.isnan(want) and math.isnan(value))
    else:
        result.max_abs_error = float(abs(value - want))
        result.ok = value == want
    if not result.ok:
        result.problem = f"{value!r}, expected {want!r}"
    return result
