"""The Dim.AUTO retry applies only to exports that failed for a reason other than a specialization."""

from torch.export import Dim

from compatcheck.diagnose.dynamic_dims import as_auto, is_specialization


def test_every_dynamic_dim_is_spelled_auto_and_nothing_else_changes():
    shapes = {"input_ids": {0: Dim.DYNAMIC, 1: Dim.DYNAMIC}, "mask": None, "pair": ({0: Dim.DYNAMIC}, None)}
    assert as_auto(shapes) == {"input_ids": {0: Dim.AUTO, 1: Dim.AUTO}, "mask": None, "pair": ({0: Dim.AUTO}, None)}


def test_a_specialization_anywhere_in_the_cause_chain_is_recognized():
    cause = ValueError("- Received user-specified dim hint Dim.DYNAMIC(min=None, max=None), but export 0/1 "
                       "specialized due to hint of 1 for dimension inputs['x'].shape[0].")
    outer = RuntimeError("Failed to export the model with torch.export")
    outer.__cause__ = cause
    assert is_specialization(outer)
    assert not is_specialization(ValueError("Cannot view a tensor with shape torch.Size([s11, s53, 4, 8])"))
