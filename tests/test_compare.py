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


# The classes of false verdicts the comparison's rule table closes (each failed on the chain of special
# cases it replaced).

def test_an_elements_cancellation_error_covers_no_larger_neighbour():
    """Class 1: one near-zero element eager gets 0.25 wrong lends nothing to elements of another size."""
    truth = torch.linspace(0.2, 0.7, 44, dtype=torch.float64)
    truth[0] = 1e-3
    eager = truth.float()
    eager[0] += 0.25
    frozen = eager.clone()
    frozen[10:22] += 0.0176
    result = compare_leaf("o", eager, frozen, 1e-5, 1e-4, fp64=lambda: truth)
    assert not result.ok and result.rule == "float64" and 10 <= result.worst_index[0] < 22


def test_a_wrong_column_in_float16_is_not_averaged_away():
    """Class 2: with --dtype float16, one column of 512 negated fails element by element."""
    truth = torch.randn(64, 512, dtype=torch.float64, generator=torch.Generator().manual_seed(0))
    eager = truth.half()
    wrong = eager.clone()
    wrong[:, 7] = -wrong[:, 7]
    result = compare_leaf("o", eager, wrong, 1e-3, 1e-3, fp64=lambda: truth, float32=lambda: truth.float())
    assert not result.ok and result.rule == "reduced precision" and result.worst_index[1] == 7
    assert compare_leaf("o", eager, eager.clone(), 1e-3, 1e-3, fp64=lambda: truth, float32=lambda: truth.float()).ok


def test_a_bfloat16_leaf_of_a_float32_model_gets_no_percent_sized_allowance():
    """Class 3: a bfloat16 output 4.5% off on a third of its values is a mismatch."""
    generator = torch.Generator().manual_seed(0)
    truth = torch.rand(2048, dtype=torch.float64, generator=generator) + 0.5
    eager = truth.bfloat16()
    off = eager.clone()
    picked = torch.randperm(2048, generator=generator)[:647]
    off[picked] = (off[picked].double() * 1.045).bfloat16()
    assert not compare_leaf("o", eager, off, 1e-2, 1.6e-2, fp64=lambda: truth).ok


def test_container_subclasses_are_compared_by_their_items_and_attributes():
    """Class 4: a dict, list or tuple subclass pytree does not know is opened, not compared by type."""
    class Output(dict):
        pass

    class Pair(tuple):
        pass

    class Batch(list):
        def __init__(self, items, scale):
            super().__init__(items)
            self.scale = scale

    for want, got in [(Output(probs=torch.ones(3)), Output(probs=torch.ones(3) + 0.4)),
                      (Pair((torch.ones(2), torch.zeros(2))), Pair((torch.ones(2), torch.ones(2)))),
                      (Batch([torch.ones(2)], torch.ones(1)), Batch([torch.ones(2)], torch.zeros(1)))]:
        leaves, _ = compare_outputs(want, got, DEFAULT)
        assert leaves and not all(leaf.ok for leaf in leaves), want
        assert all(leaf.ok for leaf in compare_outputs(want, want, DEFAULT)[0])


def test_a_per_output_tolerance_binds_the_output_it_names_and_a_key_naming_none_is_refused():
    """Class 5: `probs` names the leaf `1.probs`; a key that names no output is the user's error."""
    from compatcheck.errors import UsageError

    tolerances = Tolerances(model={"probs": {"atol": 1e-6, "rtol": 0.0}})
    leaves, _ = compare_outputs((torch.ones(2), {"probs": torch.ones(3)}),
                                (torch.ones(2), {"probs": torch.ones(3) + 1e-3}), tolerances)
    assert [leaf.ok for leaf in leaves] == [True, False] and leaves[1].atol == 1e-6
    tolerances.check(["0", "1.probs"])
    with pytest.raises(UsageError, match=r"TOLERANCE\['probs'\] names no output; the outputs are: 0, 1.logits"):
        tolerances.check(["0", "1.logits"])


def test_indices_at_tied_values_and_integers_at_rounding_edges_are_accepted_and_counted():
    """Class 6: topk indices swapped where the values tie; an integer the float64 run rounds the artifact's
    way. A swap where the values differ, or an integer float64 does not give, stays a mismatch."""
    values = torch.tensor([[3.0, 2.0, 0.0, 0.0], [5.0, 1.0, 0.0, 0.0]])
    indices = torch.tensor([[4, 1, 0, 2], [3, 0, 1, 2]])
    swapped = indices.clone()
    swapped[:, 2:] = indices[:, 2:].flip(-1)
    leaves, _ = compare_outputs((values, indices), (values.clone(), swapped), DEFAULT)
    assert all(leaf.ok for leaf in leaves) and "4 of 8 values differ, accepted: 4 at ties" in leaves[1].accepted
    wrong = indices.clone()
    wrong[0, :2] = indices[0, :2].flip(-1)
    assert not compare_outputs((values, indices), (values.clone(), wrong), DEFAULT)[0][1].ok
    pixels = torch.tensor([12, 200, 7], dtype=torch.uint8)
    edge = torch.tensor([12, 201, 7], dtype=torch.uint8)
    leaves, _ = compare_outputs(pixels, edge, DEFAULT, fp64=lambda: edge.clone())
    assert leaves[0].ok and "rounding edges" in leaves[0].accepted
    assert not compare_outputs(pixels, edge, DEFAULT, fp64=lambda: pixels.clone())[0][0].ok


def test_python_numbers_are_judged_at_the_dtype_they_came_from():
    """Class 7: a float32 sum's `.item()` in another summation order is noise; an int as a 0-d tensor is
    compared by value."""
    x = torch.randn(4096, generator=torch.Generator().manual_seed(0))
    eager = x.sum().item()
    other = x.view(64, 64).sum(0).sum().item()
    assert eager != other
    leaves, _ = compare_outputs(eager, other, DEFAULT, fp64=lambda: x.double().sum().item())
    assert leaves[0].ok and leaves[0].dtype == "float32"
    assert compare_outputs(7, torch.tensor(7), DEFAULT)[0][0].ok
    assert not compare_outputs(7, torch.tensor(8), DEFAULT)[0][0].ok
    assert not compare_outputs(eager, eager + 0.01, DEFAULT, fp64=lambda: x.double().sum().item())[0][0].ok


def test_a_kernel_that_rounds_other_elements_keeps_its_pass_and_one_that_loses_a_magnitude_does_not():
    """Class 8 beside the corpus's expm1: sin of float32 arguments near 1000, computed by a kernel whose
    range reduction rounds otherwise, is within what eager shows at each magnitude; Exp(x) - 1 near 1e-8
    loses every digit of that magnitude, under atol."""
    import math

    generator = torch.Generator().manual_seed(3)
    steps = torch.randint(0, 1000, (64,), generator=generator).double()
    freqs = torch.exp(-math.log(10000) * torch.arange(128, dtype=torch.float64) / 128)
    truth = torch.cat([(steps[:, None] * freqs).cos(), (steps[:, None] * freqs).sin()], -1)
    args = steps.float()[:, None] * freqs.float()
    eager = torch.cat([args.cos(), args.sin()], -1)
    x = args.double()
    x = x + 2e-6 * (x.abs() / 1000) * (2 * torch.rand(x.shape, generator=generator, dtype=torch.float64) - 1)
    kernel = torch.cat([x.cos(), x.sin()], -1).float()
    assert compare_leaf("emb", eager, kernel, 1e-5, 1e-4, fp64=lambda: truth).ok
    small = torch.rand(4, 8, generator=generator, dtype=torch.float64) * 3e-8
    lost = compare_leaf("rate", torch.expm1(small.float()), torch.exp(small.float()) - 1, 1e-5, 1e-4,
                        fp64=lambda: torch.expm1(small))
    assert not lost.ok and "loses digits eager keeps" in lost.problem


def test_sparse_and_conjugate_outputs_are_compared_by_value():
    """Class 9: compatcheck reads them instead of raising."""
    sparse = torch.eye(3).to_sparse()
    assert compare_outputs(sparse, sparse.clone(), DEFAULT)[0][0].ok
    assert not compare_outputs(sparse, (2 * torch.eye(3)).to_sparse(), DEFAULT)[0][0].ok
    lazy = torch.randn(3, dtype=torch.complex128).conj()
    assert compare_outputs(lazy, lazy.resolve_conj(), DEFAULT)[0][0].ok


def test_an_exception_inside_the_comparison_is_compatchecks_and_names_the_leaf():
    from compatcheck.compare import ComparisonError
    from compatcheck.errors import InternalError

    with pytest.raises(ComparisonError, match="comparing output out"):
        compare_outputs({"out": torch.ones(2)}, {"out": torch.ones(2) + 1},
                        Tolerances(model={"out": {"atol": "x"}}))
    assert issubclass(ComparisonError, InternalError)


def test_every_leaf_names_the_rule_that_decided_it():
    from compatcheck.compare import RULES

    leaves, _ = compare_outputs({"x": torch.ones(2), "n": 3, "s": "a"}, {"x": torch.ones(2), "n": 3, "s": "a"},
                                DEFAULT)
    names = {rule.name for rule in RULES} | {"equal"}
    assert all(leaf.rule in names for leaf in leaves) and [leaf.rule for leaf in leaves] == ["agree", "integers",
                                                                                             "equal"]


def test_a_bands_typical_distance_is_numpys_lower_quantile():
    from compatcheck.compare.elements import BAND_QUANTILE, Bands

    rng = np.random.default_rng(0)
    for n in (1, 2, 3, 99, 100, 101, 1234):
        error = rng.random(n)
        one_band = Bands(np.ones(n))
        assert (one_band.typical(error) == np.quantile(error, BAND_QUANTILE, method="lower")).all()
        assert (one_band.count() == n).all()
    apart = Bands(np.array([1.0, 1.2, 1e3, 0.0]))  # 1e3 and 0 are bands of their own
    assert apart.count().tolist() == [2, 2, 1, 1]
