"""The sweep's input sets are made from the user's samples (slices and tiles, never fresh values), sized
along each dynamic dimension together across the inputs that share it; --sweep off runs the samples only."""

import torch

from compatcheck import check
from compatcheck.spec import assemble
from compatcheck.sweep import groups, resize
from tests.conftest import ROOT
from tests.test_verdict_causes import load


def spec_of(model, inputs):
    return assemble(ROOT / "model.py", "get_model", model, inputs, "inputs", "infer", None, "TOLERANCE")


def test_the_dims_two_inputs_share_are_one_group_and_resizing_keeps_the_samples_values():
    ids = torch.randint(0, 50, (3, 9))
    mask = torch.ones(3, 9, dtype=torch.long)
    spec = spec_of(torch.nn.Identity(), [{"input_ids": ids[:2, :6], "attention_mask": mask[:2, :6]},
                                         {"input_ids": ids, "attention_mask": mask}])
    found = {group.name: group.places for group in groups(spec)}
    assert found == {"batch": ((0, 0), (1, 0)), "input_ids.shape[1]": ((0, 1), (1, 1))}
    length = next(group for group in groups(spec) if group.name != "batch")
    longer = resize(spec.input_sets[1], length, 20)
    assert [tuple(t.shape) for t in longer.leaves()] == [(3, 20), (3, 20)]
    assert torch.equal(longer.kwargs["input_ids"][:, 9:18], ids) and longer.kwargs["attention_mask"].unique().tolist() == [1]
    shorter = resize(spec.input_sets[1], length, 4)
    assert torch.equal(shorter.kwargs["input_ids"], ids[:, :4])


def test_sweep_off_gives_the_samples_only_verdicts():
    module = load(ROOT / "tests" / "models" / "size_branch_above_samples.py")
    report = check(module.get_model(), module.get_inputs(), isolate=False, stages=["jit_trace"], sweep="off",
                   cache=False)
    assert {s.name: s.status.value for s in report.stages} == {"eager": "pass", "jit_trace": "pass"}
    assert report.stages[0].sweep is None and report.stages[1].swept == []
