"""A team's own tests, as they would write them: models built in the test file, one line per check.

tests/test_pytest_plugin.py runs this file with pytest in a subprocess and checks what pytest
reports: one test fails on the model's data-dependent branch, one on a model that segfaults, and
the others still run and pass.
"""

import ctypes

import torch
from torch import nn


class Gate(nn.Module):
    def __init__(self):
        super().__init__()
        self.linear = nn.Linear(4, 4)

    def forward(self, x):
        y = self.linear(x)
        if x.sum() > 0:
            return y * 2
        return -y


class Segfaults(nn.Module):
    def forward(self, x):
        ctypes.string_at(0)  # reads address 0: the process dies with SIGSEGV
        return x


class Mlp(nn.Module):
    def __init__(self):
        super().__init__()
        self.layers = nn.Sequential(nn.Linear(8, 16), nn.ReLU(), nn.Linear(16, 4))

    def forward(self, x):
        return self.layers(x).softmax(-1)


def test_gate_deploys_to_onnx(compatcheck):
    compatcheck.assert_deployable(Gate(), [(torch.rand(3, 4) + 0.1,), (-torch.rand(3, 4) - 0.1,)], targets=["onnx"])


def test_segfaulting_model_deploys_to_onnx(compatcheck):
    compatcheck.assert_deployable(Segfaults(), torch.randn(2, 4), targets=["onnx"])


def test_mlp_deploys_to_onnx(compatcheck):
    report = compatcheck.assert_deployable(Mlp(), [torch.randn(2, 8), torch.randn(5, 8)], targets=["onnx"])
    assert report.model.dynamic_shapes_inferred


def test_after_the_crash_the_suite_goes_on():
    assert torch.ones(2).sum() == 2
