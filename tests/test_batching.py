"""Batch independence in eager, no server: each sample alone against the batch of the user's samples,
counted only beyond fp64-adjudicated noise, with the first divergent op at the user's line and the
norm's rewrite where one fits; padding only where the model file says how. The model files are loaded
as `compatcheck run` loads them (tests/models/ holds the causes the in-process walk checks too)."""

import pytest
import torch

from compatcheck.diagnose.batching import MAX_SAMPLES, _groups, batch_of, samples
from compatcheck.errors import UsageError
from compatcheck.options import RunOptions
from compatcheck.spec import load
from compatcheck.stages.eager import Eager
from compatcheck.stages.base import StageContext
from tests.conftest import MODELS, ROOT, run_cli


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


SIGNAL = """
import torch
{batch_dim}

class Centre(torch.nn.Module):
    def forward(self, x):
        return x - x.mean({over})


def get_model():
    return Centre()


def get_inputs():
    return [torch.randn({first}), torch.randn({second})]
"""


def signal(write_model, batch_dim="", over="", first="16", second="24", name="model.py"):
    return write_model(SIGNAL.format(batch_dim=batch_dim, over=over, first=first, second=second), name)


def test_a_model_without_a_batch_dim_is_told_how_to_declare_it(tmp_path, write_model):
    [finding] = batch_findings(signal(write_model), tmp_path)  # a 1-D signal: dim 0 is its length
    assert "taken along dim 0 of the inputs" in finding.message
    assert "BATCH_DIM in the model file (None for no batch dim" in finding.message


@pytest.mark.parametrize("batch_dim", ["BATCH_DIM = None", 'BATCH_DIM = {"x": None}'])
def test_batch_dim_none_declares_no_batch(tmp_path, write_model, batch_dim):
    path = signal(write_model, batch_dim)
    assert samples(context(path, tmp_path).spec) == []
    assert batch_findings(path, tmp_path) == []


def test_batch_dim_one_takes_the_samples_along_dim_1(tmp_path, write_model):
    # Channels by batch: centring each column is independent of the other columns, centring each row is not.
    columns = signal(write_model, "BATCH_DIM = 1", "0, keepdim=True", "4, 3", "6, 5")
    found = samples(context(columns, tmp_path).spec)
    assert [tuple(sample.inputs.args[0].shape) for sample in found[:2]] == [(4, 1), (6, 1)]
    assert batch_findings(columns, tmp_path) == []
    along_dim_0 = signal(write_model, "", "0, keepdim=True", "4, 3", "6, 5", "along_dim_0.py")
    assert batch_findings(along_dim_0, tmp_path) != []
    [rows] = batch_findings(signal(write_model, "BATCH_DIM = 1", "1, keepdim=True", "4, 3", "4, 5", "rows.py"), tmp_path)
    assert "taken along dim 1 of the inputs" in rows.message and rows.op == "aten.mean"


SHARED = """
import torch

BATCH_DIM = {"table": None}


class Lookup(torch.nn.Module):
    def forward(self, x, table):
        return x * table


def get_model():
    return Lookup()


def get_inputs():
    return [(torch.randn(3, 4), torch.randn(4)), (torch.randn(5, 4), torch.randn(4))]
"""


def test_an_input_batch_dim_names_none_is_shared_by_every_sample(tmp_path, write_model):
    path = write_model(SHARED)
    ctx = context(path, tmp_path)
    found = samples(ctx.spec)
    assert len(found) == 8 and all(sample.inputs.args[1].shape == (4,) for sample in found)
    assert [len(group) for group in _groups(found, {})] == [3, 5], "only samples of one input set share its table"
    assert batch_findings(path, tmp_path) == []


@pytest.mark.parametrize("batch_dim, says", [
    ("BATCH_DIM = -1", r"BATCH_DIM must be a dim index \(an int >= 0\), None for no batch dim, or a dict"),
    ('BATCH_DIM = "batch"', "got 'batch'"),
    ('BATCH_DIM = {"y": 0}', "BATCH_DIM names 'y', which is no tensor input of forward; its tensor inputs are x"),
    ('BATCH_DIM = {"x": 1.0}', r"BATCH_DIM\['x'\] must be a dim index"),
    ("BATCH_DIM = 1", r"BATCH_DIM puts x's batch on dim 1, but x has 1 dim \(shape \[16\]\)"),
])
def test_a_bad_batch_dim_is_a_model_file_error(write_model, batch_dim, says):
    with pytest.raises(UsageError, match=says):
        load(signal(write_model, batch_dim))


def test_a_bad_batch_dim_exits_2_with_one_line(tmp_path, write_model):
    proc = run_cli("run", str(signal(write_model, "BATCH_DIM = 2")), "--stages", "eager", "--no-cache")
    assert proc.returncode == 2
    assert proc.stderr.strip() == "error: BATCH_DIM puts x's batch on dim 2, but x has 1 dim (shape [16])"
