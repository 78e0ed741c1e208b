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
    """Rounding noise of the same size in eager and the backend, beyond a tight tolerance: noise."""
    torch.manual_seed(0)
    truth = torch.randn(1000, dtype=torch.float64)
    eager = (truth * (1 + 2e-6 * torch.randn(1000, dtype=torch.float64))).float()
    backend = (truth * (1 + 2e-6 * torch.randn(1000, dtype=torch.float64))).float()
    plain = compare_leaf("o", eager, backend, 1e-7, 1e-6)
    assert not plain.ok
    judged = compare_leaf("o", eager, backend, 1e-7, 1e-6, fp64=lambda: truth)
    assert judged.ok and judged.fp64_verdict == "within-noise"


def test_fp64_adjudication_still_fails_a_real_divergence():
    torch.manual_seed(0)
    truth = torch.randn(1000, dtype=torch.float64)
    eager = (truth * (1 + 2e-6 * torch.randn(1000, dtype=torch.float64))).float()
    wrong = (truth + 1e-1 * torch.randn(1000, dtype=torch.float64)).float()
    judged = compare_leaf("o", eager, wrong, 1e-7, 1e-6, fp64=lambda: truth)
    assert not judged.ok and "from float64 at" in judged.fp64_verdict and "where eager is" in judged.fp64_verdict


def test_one_element_off_fails_whatever_the_other_elements_magnitude():
    """An RMS over the leaf would be dominated by the areas' noise (about 20) and hide a score of 0.4 where
    eager, like float64, has 0."""
    torch.manual_seed(0)
    area = 4e8 * (1 + torch.rand(6, dtype=torch.float64))
    truth = torch.stack([area, torch.zeros(6, dtype=torch.float64)], dim=1)
    eager = truth.float()
    backend = torch.stack([(area * (1 + 1e-7 * torch.randn(6, dtype=torch.float64))).float(),
                           torch.tensor([0, 0, 0.4, 0, 0, 0])], dim=1)
    judged = compare_leaf("boxes", eager, backend, 1e-5, 1e-4, fp64=lambda: truth)
    assert not judged.ok and judged.worst_index == [2, 1]


def test_an_error_under_atol_that_is_the_whole_value_fails():
    """log1p of values near 1e-8 computed as log(1 + x): 0, under atol, where eager and float64 agree."""
    torch.manual_seed(0)
    x = torch.rand(32, dtype=torch.float64) * 1e-8
    judged = compare_leaf("o", torch.log1p(x).float(), torch.log(1 + x.float()), 1e-5, 1e-4, fp64=lambda: torch.log1p(x))
    assert not judged.ok and "loses digits eager keeps" in judged.problem


def test_small_values_of_a_larger_output_keep_their_rounding_noise():
    """Values near zero where a sum of larger terms cancels: eager and the backend round them differently, by
    a rounding step of the output's scale."""
    torch.manual_seed(0)
    terms = torch.randn(64, 256, dtype=torch.float64)
    truth = terms.sum(1)
    eager = terms.float().sum(1)
    backend = terms.float().flip(1).cumsum(1)[:, -1]
    assert compare_leaf("o", eager, backend, 1e-5, 1e-4, fp64=lambda: truth).ok


def test_a_tolerance_the_user_set_is_a_bound_no_float64_run_widens():
    torch.manual_seed(0)
    truth = torch.randn(1000, dtype=torch.float64)
    eager = (truth * (1 + 2e-6 * torch.randn(1000, dtype=torch.float64))).float()
    backend = (truth * (1 + 2e-6 * torch.randn(1000, dtype=torch.float64))).float()
    judged = compare_leaf("o", eager, backend, 1e-7, 1e-6, fp64=lambda: truth, binding=True)
    assert not judged.ok and "your tolerance" in judged.problem
    assert Tolerances(model={"atol": 1e-3}).binding("o") and Tolerances(cli_rtol=1e-3).binding("o")
    assert Tolerances(model={"y": {"atol": 1e-3}}).binding("y") and not Tolerances(model={"y": {}}).binding("z")


def test_eager_far_from_float64_lends_no_pass():
    """Eager itself 0.4 from float64 (a cancelling formula): an artifact off eager cannot be called noise."""
    truth = torch.linspace(-1, 1, 50, dtype=torch.float64)
    eager = (truth + 0.4).float()
    backend = truth.float()
    judged = compare_leaf("o", eager, backend, 1e-5, 1e-4, fp64=lambda: truth)
    assert not judged.ok and "numerically unstable" in judged.problem


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
