"""Batch independence in eager, no server: each sample alone against the batch of the user's samples,
counted only beyond fp64-adjudicated noise, with the first divergent op at the user's line and the
norm's rewrite where one fits; padding only where the model file says how. The model files are loaded
as `compatcheck run` loads them (tests/models/ holds the causes the in-process walk checks too)."""

import pytest
import torch

from compatcheck.diagnose.batching import MAX_SAMPLES, batch_of, samples
from compatcheck.errors import UsageError
from compatcheck.options import RunOptions
from compatcheck.spec import load
from compatcheck.stages.eager import Eager
from compatcheck.stages.base import StageContext
from tests.conftest import MODELS, ROOT


def context(path, tmp_path) -> StageContext:
    return StageContext(load(path), RunOptions(), tmp_path, {}, {})


def batch_findings(path, tmp_path):
    ctx = context(path, tmp_path)
    stage = Eager()
    with torch.no_grad():
        stage.build(ctx)
    return [finding for finding in stage.diagnose(ctx, None) if finding.kind == "batch-dependence"]


def line_of(path, start) -> int:
    [number] = [n for n, line in enumerate(path.read_text().splitlines(), 1) if line.strip().startswith(start)]
    return number


LINEAR = """
import torch

def get_model():
    return torch.nn.Sequential(torch.nn.Linear(8, 16), torch.nn.ReLU(), torch.nn.Linear(16, 3)).eval()

def get_inputs():
    return [torch.randn(3, 8), torch.randn(5, 8)]
"""


@pytest.mark.parametrize("source", ["convnet.py", "train_mode.py", LINEAR], ids=["convnet", "batchnorm-eval", "linear"])
def test_conv_linear_and_an_eval_norm_get_no_batch_dependence(tmp_path, write_model, source):
    path = MODELS / source if source.endswith(".py") else write_model(source)
    assert len(samples(context(path, tmp_path).spec)) > 2  # it was checked, not skipped
    assert batch_findings(path, tmp_path) == []


def test_batch_statistics_name_the_op_and_the_line(tmp_path):
    path = ROOT / "tests" / "models" / "batch_statistics.py"
    [finding] = batch_findings(path, tmp_path)
    assert (finding.op, finding.file, finding.line) == ("aten.mean", "batch_statistics.py",
                                                         line_of(path, "return h - h.mean"))
    assert "inside a batch of 8 of your samples differs from its answer alone" in finding.message
    assert finding.rewrite is None


CPU_GEMM = """
import torch

def get_model():
    return torch.nn.Linear(256, 256).eval()

def get_inputs():
    return [torch.randn(3, 256), torch.randn(5, 256)]
"""


def test_kernel_noise_across_batch_sizes_is_not_batch_dependence(tmp_path, write_model):
    path = write_model(CPU_GEMM)
    ctx = context(path, tmp_path)
    found = samples(ctx.spec)
    with torch.no_grad():
        alone = torch.cat([ctx.spec.model(*sample.inputs.args) for sample in found])
        batched = ctx.spec.model(*batch_of(found, {}).args)
    assert not torch.equal(alone, batched)  # the kernels do differ: the values near 0 go to the adjudication
    assert batch_findings(path, tmp_path) == []


NORM_IN_FORWARD = """
import torch
from torch import nn


class Net(nn.Module):
    def __init__(self):
        super().__init__()
        self.proj = nn.Linear(8, 4)
        self.norm = nn.BatchNorm1d(4{built})

    def forward(self, x):
        {flip}
        return self.norm(self.proj(x))


def get_model():
    return Net().eval()


def get_inputs():
    return [torch.randn(3, 8), torch.randn(5, 8)]
"""


def test_a_norm_switched_to_training_in_forward_gets_model_eval(tmp_path, write_model):
    path = write_model(NORM_IN_FORWARD.format(built="", flip="self.norm.train()"))
    [finding] = batch_findings(path, tmp_path)
    assert (finding.op, finding.line) == ("BatchNorm1d", line_of(path, "return self.norm"))
    assert "alone (a batch of 1) raises ValueError" in finding.message and "training mode" in finding.message
    assert finding.rewrite == "model.eval()"


def test_a_norm_without_running_statistics_points_at_where_it_was_built(tmp_path, write_model):
    path = write_model(NORM_IN_FORWARD.format(built=", track_running_stats=False", flip="pass"))
    [finding] = batch_findings(path, tmp_path)
    assert finding.line == line_of(path, "self.norm = nn.BatchNorm1d")
    assert "track_running_stats=False" in finding.message
    assert finding.rewrite == "self.norm = nn.BatchNorm1d(4)"


POOLED = """
import torch
from torch import nn
{padding}

class Pool(nn.Module):
    def __init__(self):
        super().__init__()
        self.embed = nn.Embedding(20, 8)

    def forward(self, ids, mask):
        h = self.embed(ids) * mask[..., None]
        return {pooled}


def get_model():
    return Pool().eval()


def get_inputs():
    return [{{"ids": torch.randint(1, 20, (2, 5)), "mask": torch.ones(2, 5, dtype=torch.long)}},
            {{"ids": torch.randint(1, 20, (3, 7)), "mask": torch.ones(3, 7, dtype=torch.long)}}]
"""
MASKED_MEAN = "h.sum(1) / mask.sum(1, keepdim=True)"
PADDING = 'PADDING = {"ids": 0, "mask": 0}'


def test_padding_batches_samples_of_other_lengths_where_the_model_file_says_how(tmp_path, write_model):
    masked = write_model(POOLED.format(padding=PADDING, pooled=MASKED_MEAN), "masked.py")
    ctx = context(masked, tmp_path)
    batch = batch_of(samples(ctx.spec), ctx.spec.padding)
    assert batch.kwargs["ids"].shape == (5, 7) and batch.kwargs["mask"][0].tolist() == [1] * 5 + [0] * 2
    assert batch_findings(masked, tmp_path) == []

    ignores_mask = write_model(POOLED.format(padding=PADDING, pooled="h.mean(1)"), "ignores_mask.py")
    [finding] = batch_findings(ignores_mask, tmp_path)
    assert (finding.op, finding.line) == ("aten.mean", line_of(ignores_mask, "return h.mean(1)"))


def test_without_padding_only_samples_of_one_length_share_a_batch(tmp_path, write_model):
    path = write_model(POOLED.format(padding="", pooled="h.mean(1)"))
    assert batch_findings(path, tmp_path) == []  # the mean over the padding is never computed


@pytest.mark.parametrize("padding, says", [
    ('PADDING = {"tokens": 0}', "PADDING names 'tokens', which is no tensor input of forward; its tensor inputs "
                                "are ids, mask"),
    ('PADDING = {"ids": float("nan")}', "PADDING['ids'] must be a finite number, got nan"),
    ("PADDING = [0]", "PADDING must be a dict from input name to pad value"),
])
def test_a_bad_padding_is_a_model_file_error(write_model, padding, says):
    with pytest.raises(UsageError, match=says.replace("[", r"\[").replace("]", r"\]")):
        load(write_model(POOLED.format(padding=padding, pooled=MASKED_MEAN)))


def test_at_most_max_samples_are_run_alone_from_every_input_set(tmp_path, write_model):
    path = write_model(LINEAR.replace("[torch.randn(3, 8), torch.randn(5, 8)]",
                                      "[torch.randn(12, 8), torch.randn(20, 8)]"))
    found = samples(context(path, tmp_path).spec)
    assert len(found) == MAX_SAMPLES
    assert {sample.input_set for sample in found} == {0, 1}


def test_a_model_without_a_dynamic_batch_is_not_checked(tmp_path, write_model):
    path = write_model(LINEAR.replace("[torch.randn(3, 8), torch.randn(5, 8)]", "torch.randn(3, 8)"))
    assert samples(context(path, tmp_path).spec) == []
