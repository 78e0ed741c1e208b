"""The 0/1 specialization: a sample (input set 1) with size 1 in a dimension the other input sets vary."""

import pytest

from tests.conftest import run_json
from tests.test_findings import line_of

BATCH_OF_ONE = '''
import torch
from torch import nn


class Squeezed(nn.Module):
    def forward(self, x):
        if x.shape[0] == 1:
            return x[0].relu()[None]
        return self.head(x)

    def head(self, x):
        return x.relu()


def get_model():
    return Squeezed()


def get_inputs():
    return [(torch.randn(1, 4),), (torch.randn(3, 4),)]
'''


@pytest.mark.slow
def test_a_batch_of_one_as_the_sample_names_the_input_set_to_build_from(tmp_path, write_model):
    path = write_model(BATCH_OF_ONE)
    proc, report = run_json(tmp_path, "run", str(path), "--stages", "jit_trace,onnx_export")
    verdicts = {s["name"]: s["status"] for s in report["stages"]}
    assert verdicts == {"eager": "pass", "jit_trace": "mismatch", "onnx_export": "fail"}, proc.stdout
    for stage in report["stages"][1:]:
        first = stage["findings"][0]
        assert (first["kind"], first["op"], first["line"]) == ("dynamic-shape", "size-1 sample",
                                                                line_of(path, "return [(torch.randn(1, 4),)"))
        assert "has size 1 in dim 0 of x, where input set 2 has 3" in first["message"]
        assert "Fix, checked: built from input set 2, it passes on every input set" in first["message"]
        assert first["rewrite"].splitlines()[-1] == "return [(torch.randn(3, 4),), (torch.randn(1, 4),)]"


@pytest.mark.slow
def test_a_batch_of_one_that_does_not_matter_gets_no_such_finding(tmp_path, write_model):
    path = write_model(BATCH_OF_ONE.replace("if x.shape[0] == 1:\n            return x[0].relu()[None]\n", ""))
    proc, report = run_json(tmp_path, "run", str(path), "--stages", "jit_trace,onnx_export,onnxruntime")
    assert set(s["status"] for s in report["stages"]) == {"pass"}, proc.stdout
    assert not report["findings"]


PROMPTS = '''
import torch
from torch import nn


class PromptDecoder(nn.Module):
    def __init__(self):
        super().__init__()
        self.image = nn.Linear(8, 8)
        self.point = nn.Linear(2, 8)

    def forward(self, image, points):  # image: (batch, tokens, 8); points: (batch, prompts, 2)
        scores = self.point(points) @ self.image(image).transpose(1, 2)
        return scores.squeeze(1) if points.shape[1] == 1 else scores.mean(1)


def get_model():
    return PromptDecoder().eval()


def get_inputs():
    def one(batch, prompts):
        return torch.randn(batch, 5, 8), torch.randn(batch, prompts, 2)
    return [one(2, 1), one(1, 3), one(3, 3)]
'''


@pytest.mark.slow
def test_a_prompt_count_of_one_in_the_sample_is_answered_from_every_input_set(tmp_path, write_model):
    """Two inputs (torch names the dim by the parameter, 'points'); input set 2 has 3 prompts but a batch of 1,
    input set 3 has 2 or more in every dim: the recipe builds from set 3, for onnxruntime too (the ONNX file
    built again from it)."""
    path = write_model(PROMPTS)
    proc, report = run_json(tmp_path, "run", str(path), "--stages", "export,onnx_export,onnxruntime")
    stages = {s["name"]: s for s in report["stages"]}
    for name in ("export", "onnx_export", "onnxruntime"):
        assert stages[name]["status"] == "fail", proc.stdout
        first = stages[name]["findings"][0]
        assert (first["kind"], first["op"]) == ("dynamic-shape", "size-1 sample"), proc.stdout
        assert "has size 1 in dim 1 of points, where input set 2 has 3" in first["message"]
        assert "Fix, checked: built from input set 3, it passes on every input set." in first["message"]
        assert first["checked_by"].startswith("built from input set 3")
        assert first["line"] == line_of(path, "return [one(2, 1)")  # get_inputs' own return, not its helper's
        assert first["rewrite"].splitlines()[-1] == "return [one(3, 3), one(2, 1), one(1, 3)]"
