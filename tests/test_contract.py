"""The comparison's contract, tested as a contract (docs/comparison.md): generated outputs of every kind the
rules read, with an error planted at least twice above the contract's bound at its element, are never
judged pass; benign perturbations (float32 reassociation, ulp-level rounding, tie order, rounding edges)
are never judged mismatch. The bound is derived here from how eager was made (one rounding of the
float64 value), not read from the code under test."""

from __future__ import annotations

import numpy as np
import pytest
import torch
from hypothesis import HealthCheck, assume, given, settings
from hypothesis import strategies as st

from compatcheck.compare import DEFAULT_TOLERANCES, Tolerances, compare_leaf, compare_outputs
from compatcheck.compare.elements import FP64_MULTIPLIER, ROUNDING_STEPS

# derandomize: the same examples on every run and machine; no example database is written in CI.
CONTRACT = settings(max_examples=60, derandomize=True, database=None, deadline=None,
                    suppress_health_check=[HealthCheck.too_slow])
DTYPES = [torch.float32, torch.float16, torch.bfloat16]


@st.composite
def truths(draw, max_elements: int = 48):
    """A float64 output: a shape, a magnitude (1e-9 to 1e4), signs, exact zeros, near-zero values, values
    that cancel (a large value minus a near-equal one) and ties."""
    shape = draw(st.lists(st.integers(1, 6), min_size=1, max_size=3).filter(lambda s: np.prod(s) <= max_elements))
    seed = draw(st.integers(0, 2**31 - 1))
    scale = 10.0 ** draw(st.integers(-9, 4))
    generator = torch.Generator().manual_seed(seed)
    values = torch.randn(shape, dtype=torch.float64, generator=generator) * scale
    kind = draw(st.sampled_from(["plain", "zeros", "cancel", "ties", "tiny"]))
    flat = values.view(-1)
    if kind == "zeros":
        flat[::3] = 0.0
    elif kind == "cancel":
        big = 1e3 * scale
        flat[::2] = (big + flat[::2]) - big
    elif kind == "ties":
        flat[1::2] = flat[0]
    elif kind == "tiny":
        flat[::2] *= 1e-6
    return values


def bound(truth: torch.Tensor, eager: torch.Tensor, dtype: torch.dtype) -> torch.Tensor:
    """The most the contract allows at each element, from how eager was made: one rounding of the float64
    value, so eager's distance at any element of any magnitude is at most half a rounding step there."""
    atol, rtol = DEFAULT_TOLERANCES[dtype]
    info = torch.finfo(dtype)
    size = truth.abs()
    scale = size.pow(2).mean().sqrt()
    eager_error = (eager.double() - truth).abs()
    typical = info.eps * 3 * size  # the band reaches 2.8 times an element's size
    own = torch.maximum(eager_error, typical)
    tolerance = atol + rtol * size  # the planted error may be beyond it and the float64 allowance both
    return (tolerance + rtol * size + FP64_MULTIPLIER * own + info.eps * size + info.tiny
            + ROUNDING_STEPS * info.eps * scale + atol / 10)


@CONTRACT
@given(truth=truths(), dtype=st.sampled_from(DTYPES), at=st.integers(0, 10**6), sign=st.sampled_from([-1, 1]),
       reduced=st.booleans())
def test_an_error_planted_twice_above_the_bound_is_never_judged_pass(truth, dtype, at, sign, reduced):
    eager = truth.to(dtype)
    planted = eager.double().clone().view(-1)
    index = at % planted.numel()
    allowed = bound(truth, eager, dtype).view(-1)[index]
    planted[index] += sign * 2 * allowed
    artifact = planted.view(truth.shape).to(dtype)
    # A planted value that rounds back (it left the dtype's range) plants no error.
    assume(bool((artifact.double() - eager.double()).abs().view(-1)[index] >= 1.9 * allowed))
    atol, rtol = DEFAULT_TOLERANCES[dtype]
    float32 = (lambda: truth.float()) if reduced and dtype != torch.float32 else None
    result = compare_leaf("o", eager, artifact, atol, rtol, fp64=lambda: truth, float32=float32)
    assert not result.ok, (result.rule, index, float(allowed))


@CONTRACT
@given(truth=truths(), dtype=st.sampled_from(DTYPES), steps=st.integers(-2, 2), at=st.integers(0, 10**6))
def test_ulp_level_rounding_is_never_judged_mismatch(truth, dtype, steps, at):
    eager = truth.to(dtype)
    artifact = eager.clone().view(-1)
    index = at % artifact.numel()
    toward = torch.tensor(float("inf") if steps > 0 else float("-inf"), dtype=dtype)
    for _ in range(abs(steps)):
        artifact[index] = torch.nextafter(artifact[index], toward)
    atol, rtol = DEFAULT_TOLERANCES[dtype]
    result = compare_leaf("o", eager, artifact.view(truth.shape), atol, rtol, fp64=lambda: truth)
    assert result.ok, result.problem


@CONTRACT
@given(seed=st.integers(0, 2**31 - 1), rows=st.integers(1, 8), depth=st.sampled_from([16, 64, 256]),
       scale=st.sampled_from([1e-3, 1.0, 1e3]), chunk=st.sampled_from([2, 4, 8]))
def test_float32_reassociation_is_never_judged_mismatch(seed, rows, depth, scale, chunk):
    """A sum of products in another order (a kernel's blocking), against eager's, with the float64 run."""
    generator = torch.Generator().manual_seed(seed)
    a = torch.randn(rows, depth, generator=generator) * scale
    b = torch.randn(depth, 4, generator=generator)
    eager = a @ b
    blocked = sum(a[:, k:k + chunk] @ b[k:k + chunk] for k in range(0, depth, chunk))
    result = compare_leaf("o", eager, blocked, 1e-5, 1e-4, fp64=lambda: a.double() @ b.double())
    assert result.ok, result.problem


@CONTRACT
@given(seed=st.integers(0, 2**31 - 1), rows=st.integers(1, 6), width=st.integers(4, 12), k=st.integers(2, 4))
def test_indices_in_another_order_at_ties_are_never_judged_mismatch(seed, rows, width, k):
    """topk over ReLU outputs (many zeros tie): the artifact orders tied indices otherwise."""
    generator = torch.Generator().manual_seed(seed)
    x = torch.relu(torch.randn(rows, width, generator=generator))
    values, indices = torch.topk(x, k)
    flipped, other = torch.topk(x.flip(-1), k)  # the same values; tied zeros come back in another order
    other = width - 1 - other
    leaves, _ = compare_outputs((values, indices), (flipped, other), Tolerances())
    assert all(leaf.ok for leaf in leaves), [leaf.problem for leaf in leaves]


@CONTRACT
@given(seed=st.integers(0, 2**31 - 1), size=st.integers(1, 40), wrong=st.booleans())
def test_integers_off_by_a_rounding_edge_pass_only_where_float64_agrees(seed, size, wrong):
    """An 8-bit output one level off: accepted where the float64 run gives the artifact's level, a mismatch
    where it gives eager's."""
    generator = torch.Generator().manual_seed(seed)
    eager = torch.randint(1, 254, (size,), generator=generator, dtype=torch.uint8)
    artifact = eager.clone()
    artifact[seed % size] += 1
    truth = eager.clone() if wrong else artifact.clone()
    leaves, _ = compare_outputs(eager, artifact, Tolerances(), fp64=lambda: truth)
    assert leaves[0].ok is not wrong


@pytest.mark.parametrize("dtype", DTYPES)
def test_the_bound_the_property_tests_use_is_not_loose(dtype):
    """The planted error must stay an error a user cares about: at most a few times the tolerance."""
    truth = torch.linspace(-3, 3, 41, dtype=torch.float64)
    atol, rtol = DEFAULT_TOLERANCES[dtype]
    assert bool((bound(truth, truth.to(dtype), dtype) <= 4 * (atol + rtol * truth.abs()) + 8 * torch.finfo(dtype).eps * 3).all())
