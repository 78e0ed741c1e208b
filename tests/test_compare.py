"""The comparison rules, on real tensors: structure, shapes, dtypes, NaN/Inf, tolerances, fp64 adjudication."""

from collections import namedtuple
from dataclasses import dataclass

import numpy as np
import pytest
import torch

from compatcheck.compare import Tolerances, compare_leaf, compare_outputs, flatten

DEFAULT = Tolerances()


def test_nested_outputs_flatten_with_names():
    @dataclass
    class Out:
        logits: torch.Tensor
        extras: dict

    Pair = namedtuple("Pair", "a b")
    out = Out(torch.zeros(2), {"boxes": [torch.ones(1), Pair(torch.ones(3), torch.zeros(1))]})
    names = [name for name, _ in flatten(out)[0]]
    assert names == ["logits", "extras.boxes.0", "extras.boxes.1.a", "extras.boxes.1.b"]


def test_identical_nested_outputs_pass():
    out = {"a": (torch.randn(3), torch.arange(4)), "b": torch.randn(2, 2)}
    leaves, note = compare_outputs(out, out, DEFAULT)
    assert note is None and len(leaves) == 3 and all(leaf.ok for leaf in leaves)


def test_different_leaf_count_is_a_structure_problem():
    leaves, note = compare_outputs((torch.ones(2), torch.ones(2)), (torch.ones(2),), DEFAULT)
    assert leaves == [] and "1 outputs, eager returns 2" in note


def test_container_change_with_same_leaves_is_noted_not_failed():
    Pair = namedtuple("Pair", "a b")
    leaves, note = compare_outputs(Pair(torch.ones(2), torch.ones(1)), (torch.ones(2), torch.ones(1)), DEFAULT)
    assert all(leaf.ok for leaf in leaves) and note == "output structure differs from eager"


def test_flat_outputs_compare_in_leaf_order():
    expected = {"x": torch.ones(2), "y": torch.zeros(3)}
    leaves, _ = compare_outputs(expected, [np.ones(2, np.float32), np.ones(3, np.float32)], DEFAULT, flat=True)
    assert [leaf.ok for leaf in leaves] == [True, False]
    assert leaves[1].output == "y" and leaves[1].max_abs_error == 1.0


def test_shape_and_dtype_must_match():
    assert "shape [3]" in compare_leaf("o", torch.ones(2), torch.ones(3), 1e-5, 1e-4).problem
    result = compare_leaf("o", torch.ones(2), torch.ones(2, dtype=torch.float64), 1e-5, 1e-4)
    assert not result.ok and "dtype float64, expected float32" in result.problem


def test_integers_must_be_equal():
    result = compare_leaf("idx", torch.tensor([1, 2, 3]), torch.tensor([1, 2, 4]), 1.0, 1.0)
    assert not result.ok and result.worst_index == [2] and result.mismatched_fraction == pytest.approx(1 / 3)


def test_nan_in_the_same_place_passes_and_elsewhere_fails():
    nan = float("nan")
    assert compare_leaf("o", torch.tensor([1.0, nan]), torch.tensor([1.0, nan]), 1e-5, 1e-4).ok
    result = compare_leaf("o", torch.tensor([1.0, nan]), torch.tensor([nan, 2.0]), 1e-5, 1e-4)
    assert not result.ok and "NaN/Inf" in result.problem and result.required_atol is None


def test_infinities_must_match_in_sign():
    inf = float("inf")
    assert compare_leaf("o", torch.tensor([inf, 1.0]), torch.tensor([inf, 1.0]), 1e-5, 1e-4).ok
    assert not compare_leaf("o", torch.tensor([inf, 1.0]), torch.tensor([-inf, 1.0]), 1e-5, 1e-4).ok


def test_error_statistics_and_the_tolerance_that_would_pass():
    expected = torch.tensor([1.0, 2.0, 4.0, 0.0])
    actual = torch.tensor([1.0, 2.1, 4.0, 0.01])
    result = compare_leaf("o", expected, actual, atol=1e-3, rtol=1e-2)
    assert not result.ok
    assert result.max_abs_error == pytest.approx(0.1, rel=1e-5)
    assert result.max_rel_error == pytest.approx(0.05, rel=1e-5)
    assert result.mismatched_fraction == pytest.approx(0.5)
    assert result.worst_index == [1]
    # atol that passes at rtol 1e-2: max(|d| - rtol*|e|) = max(0.1 - 0.02, 0.01 - 0) = 0.08
    assert result.required_atol == pytest.approx(0.08, rel=1e-4)
    assert compare_leaf("o", expected, actual, atol=result.required_atol * 1.001, rtol=1e-2).ok
    # rtol that passes at atol 1e-3 is infinite: eager has 0 where the result has 0.01
    assert result.required_rtol == float("inf")


def test_tolerance_precedence():
    tol = Tolerances(cli_atol=0.5, model={"atol": 0.1, "rtol": 0.2, "logits": {"atol": 0.9}})
    assert tol.resolve("logits", torch.float32) == (0.9, 0.2)
    assert tol.resolve("boxes", torch.float32) == (0.5, 0.2)
    assert Tolerances().resolve("x", torch.float16) == (1e-3, 1e-3)
    assert Tolerances().resolve("x", torch.int64) == (0.0, 0.0)


def test_fp64_adjudication_accepts_a_result_as_accurate_as_eager():
    torch.manual_seed(0)
    truth = torch.randn(1000, dtype=torch.float64)
    eager = (truth + 1e-3 * torch.randn(1000, dtype=torch.float64)).float()
    backend = (truth + 1e-3 * torch.randn(1000, dtype=torch.float64)).float()
    plain = compare_leaf("o", eager, backend, 1e-5, 1e-5)
    assert not plain.ok
    judged = compare_leaf("o", eager, backend, 1e-5, 1e-5, fp64=lambda: truth)
    assert judged.ok and judged.fp64_verdict == "within-noise"


def test_fp64_adjudication_still_fails_a_real_divergence():
    torch.manual_seed(0)
    truth = torch.randn(1000, dtype=torch.float64)
    eager = (truth + 1e-3 * torch.randn(1000, dtype=torch.float64)).float()
    wrong = (truth + 1e-1 * torch.randn(1000, dtype=torch.float64)).float()
    judged = compare_leaf("o", eager, wrong, 1e-5, 1e-5, fp64=lambda: truth)
    assert not judged.ok and judged.fp64_verdict.startswith("rms error to fp64")


def test_fp64_is_computed_only_when_needed():
    calls = []
    compare_outputs(torch.ones(3), torch.ones(3), DEFAULT, fp64=lambda: calls.append(1))
    assert calls == []


def test_eager_nondeterminism_widens_what_counts_as_noise():
    expected = torch.tensor([1.0, 2.0])
    second_eager = torch.tensor([1.05, 2.0])
    actual = torch.tensor([1.08, 2.0])
    assert not compare_leaf("o", expected, actual, 1e-5, 1e-4).ok
    assert compare_leaf("o", expected, actual, 1e-5, 1e-4, noise=second_eager).ok
    assert not compare_leaf("o", expected, torch.tensor([1.5, 2.0]), 1e-5, 1e-4, noise=second_eager).ok
