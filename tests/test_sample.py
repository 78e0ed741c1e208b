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
        assert "has size 1 in dim 0 of input 1, where input set 2 has 3" in first["message"]
        assert "Fix, checked: built from input set 2, it passes on every input set" in first["message"]
        assert first["rewrite"].splitlines()[-1] == "return [(torch.randn(3, 4),), (torch.randn(1, 4),)]"


@pytest.mark.slow
def test_a_batch_of_one_that_does_not_matter_gets_no_such_finding(tmp_path, write_model):
    path = write_model(BATCH_OF_ONE.replace("if x.shape[0] == 1:\n            return x[0].relu()[None]\n", ""))
    proc, report = run_json(tmp_path, "run", str(path), "--stages", "jit_trace,onnx_export,onnxruntime")
    assert set(s["status"] for s in report["stages"]) == {"pass"}, proc.stdout
    assert not report["findings"]
