"""Where an output differs, and whether a mask input's zeros explain it."""

import numpy as np

from compatcheck.diagnose.positions import describe, differing, masked_by


def _left_padded_mask():
    mask = np.ones((2, 8), dtype=np.int64)
    mask[1, :3] = 0
    return mask


def test_describe_names_only_the_dims_that_are_not_all_involved():
    bad = np.zeros((2, 8, 16), dtype=bool)
    bad[1, :3, :] = True
    assert describe(bad) == "48 of 256 values, at dim 0 index 1 of 2; dim 1 indices 0-2 of 8"
    bad[:] = True
    assert describe(bad) == "256 of 256 values, spread over every index of every dim"


def test_differences_exactly_at_the_mask_zeros_are_attributed_to_the_mask():
    expected = np.zeros((2, 8, 16), dtype=np.float32)
    actual = expected.copy()
    actual[1, :3, :] = 0.5
    bad = differing(expected, actual, 1e-5, 1e-4)
    ids = np.where(_left_padded_mask() == 0, 0, 7)  # token ids: zeros at the padding too, but not a mask
    assert masked_by(bad, {"input_ids": ids, "attention_mask": _left_padded_mask()}) == ("attention_mask", (0, 1))


def test_a_difference_outside_the_mask_zeros_is_not_attributed():
    bad = np.zeros((2, 8, 16), dtype=bool)
    bad[1, :3, :] = True
    bad[0, 5, 2] = True  # a real position
    assert masked_by(bad, {"attention_mask": _left_padded_mask()}) is None
    assert masked_by(bad, {"features": np.zeros((2, 8), dtype=np.float32)}) is None


def test_nan_where_eager_has_nan_is_not_a_difference():
    expected = np.array([np.nan, 1.0])
    assert not differing(expected, np.array([np.nan, 1.0]), 1e-5, 1e-4).any()
    assert differing(expected, np.array([0.0, 1.0]), 1e-5, 1e-4).tolist() == [True, False]
