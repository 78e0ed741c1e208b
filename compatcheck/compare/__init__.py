"""Compare a stage's outputs with eager's: the structure (structure.py), then each leaf by the first row of
the rule table that applies (rules.py; docs/comparison.md is generated from it). Knows nothing about stages.

What `pass` means for a leaf, in short: its type, shape and dtype are eager's; integers are eager's except
at ties and rounding edges; NaN and infinity where eager has them; and each floating element within the
user's tolerance, or, where the tolerance is the default, as near the model's float64 run as eager is at
that element's magnitude (elements.py). An exception inside this comparison is compatcheck's own."""

from __future__ import annotations

import torch

from compatcheck.compare.elements import EAGER_FAR, FP64_MULTIPLIER
from compatcheck.compare.rules import RULES, Leaf, judge
from compatcheck.compare.structure import VALUES, complex_pairs, flatten, number_dtype, paired, to_tensor
from compatcheck.compare.tolerances import DEFAULT_TOLERANCES, Tolerances
from compatcheck.errors import InternalError, one_line
from compatcheck.report.model import LeafComparison

__all__ = ["DEFAULT_TOLERANCES", "EAGER_FAR", "FP64_MULTIPLIER", "RULES", "VALUES", "ComparisonError",
           "Tolerances", "compare_leaf", "compare_outputs", "flatten", "to_tensor"]


class ComparisonError(InternalError):
    """compatcheck's own comparison raised on an output: no verdict on the model."""


def compare_leaf(name: str, expected: torch.Tensor, actual, atol: float, rtol: float, *, noise=None, fp64=None,
                 values: bool = True, float32=None, binding: bool = False, partner=None) -> LeafComparison:
    """One leaf by the rule table. `fp64`: a callable giving this leaf's float64 eager value (or the exception
    that kept the model from running in float64), asked only where a rule needs it; `values=False` compares
    the type, shape and dtype only; `binding`: the tolerance is the user's own; `float32`: with --dtype, a
    callable giving this leaf's float32 answer (the reduced-precision rule); `partner`: (eager's, the
    artifact's) values beside an integer leaf."""
    return judge(Leaf(name, expected, actual, atol, rtol, binding=binding, noise=noise, fp64=fp64,
                      float32=float32, values=values, partner=partner))


def compare_outputs(expected, actual, tolerances: Tolerances, *, flat: bool = False, noise=None, fp64=None,
                    values: bool | set[int] = True, float32=None, drawn: set[int] = frozenset(),
                    ) -> tuple[list[LeafComparison], str | None]:
    """Compare one input set's outputs. `flat`: `actual` is a flat list of leaves (ONNX outputs).

    `fp64` is a callable returning the fp64 eager outputs, called only when a rule needs them. `values=False`
    compares structure, shapes and dtypes only (outputs that are random by design); a set of eager's leaf
    indices does so for those leaves alone. `drawn`: eager's leaf indices made of random draws, compared
    without the fp64 run (which draws other numbers). `float32`, with --dtype, is a callable returning the
    float32 answers: float leaves are judged by the reduced-precision rule.
    Returns the per-leaf comparisons and a structure problem or note (None when identical). Raises
    ComparisonError where compatcheck's own comparison fails on a leaf.
    """
    expected_leaves, expected_spec = flatten(expected)
    indexed, actual_leaves, note = paired(expected_leaves, expected_spec, actual, flat)
    if len(actual_leaves) != len(indexed):
        return [], f"{len(actual_leaves)} outputs, eager returns {len(indexed)}"
    noise_leaves = [leaf for _, leaf in flatten(noise)[0]] if noise is not None else None
    fp64_leaf, float32_leaf = _leaf_of(fp64), _leaf_of(float32)
    got_by_index = {index: got for (index, _), got in zip(indexed, actual_leaves)}
    results = []
    for (index, (name, want)), got in zip(indexed, actual_leaves):
        try:
            results.append(_one(name, want, got, index, tolerances, flat, values, drawn,
                                noise=to_tensor(noise_leaves[index]) if noise_leaves else None,
                                fp64=fp64_leaf, float32=float32_leaf,
                                partner=_partner(expected_leaves, got_by_index, index)))
        except Exception as exc:  # compatcheck's, never the model's
            raise ComparisonError(f"comparing output {name} with eager's raised {one_line(exc)}") from exc
    return results, note


def _one(name, want, got, index, tolerances, flat, values, drawn, *, noise, fp64, float32, partner):
    """One leaf: a value compared by the rule table, anything else (None, a string, a device) by equality."""
    number = isinstance(want, (bool, int, float, complex))
    want_t = torch.tensor(want, dtype=number_dtype(want)) if number else to_tensor(want)
    if want_t is None:
        same = type(want) is type(got) and (not isinstance(want, VALUES) or want == got)
        return LeafComparison(output=name, ok=same, problem=None if same else f"{got!r}, expected {want!r}",
                              rule="equal")
    if number:
        got = _as_number(got, want_t.dtype)
    atol, rtol = tolerances.resolve(name, want_t.dtype)
    got, complex_paired = complex_pairs(want_t, got) if flat else (got, False)
    result = compare_leaf(
        name, want_t, got, atol, rtol, noise=noise,
        fp64=None if index in drawn or fp64 is None else lambda: fp64(index),
        values=values if isinstance(values, bool) else index not in values,
        float32=(lambda: float32(index)) if float32 is not None and want_t.is_floating_point() else None,
        binding=tolerances.binding(name), partner=partner)
    if complex_paired:
        result.note = "a complex output, returned by the graph as (real, imaginary) pairs in a last dimension of 2"
    return result


def _as_number(got, dtype: torch.dtype):
    """The artifact's answer for eager's Python number: a number, or a 0-d tensor whose value converts to
    the number's dtype without loss, as a tensor of that dtype; anything else as it is (the kind rule)."""
    t = to_tensor(got)
    if t is None or t.dim() != 0:
        return got
    converted = t.to(dtype)
    return converted if bool(converted.to(t.dtype) == t) or t.isnan().item() else got


def _partner(expected_leaves, got_by_index, index):
    """(eager's, the artifact's) floating leaf of the same shape beside an integer one (values beside
    indices: the output of topk, sort, max(dim)), or None."""
    name, want = expected_leaves[index]
    if not isinstance(want, torch.Tensor) or want.is_floating_point() or want.is_complex():
        return None
    parent = name.rpartition(".")[0]
    for other, (other_name, value) in enumerate(expected_leaves):
        if (other != index and other in got_by_index and other_name.rpartition(".")[0] == parent
                and isinstance(value, torch.Tensor) and value.is_floating_point() and value.shape == want.shape):
            return value, got_by_index[other]
    return None


def _leaf_of(run):
    """index -> that leaf of the outputs `run()` gives (asked once, on first use), or the exception `run()`
    gave instead (why there is no such run); None without `run`."""
    if run is None:
        return None
    leaves: list = []

    def leaf(index: int):
        if not leaves:
            outputs = run()
            leaves.append(outputs if isinstance(outputs, BaseException) else
                          [one for _, one in flatten(outputs)[0]] if outputs is not None else [])
        found = leaves[0]
        if isinstance(found, BaseException):
            return found
        return found[index] if index < len(found) else None

    return leaf
