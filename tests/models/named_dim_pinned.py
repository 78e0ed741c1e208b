"""A dim declared dynamic with a named Dim that the code pins (`assert x.shape[0] == 4`): torch's error
names the Dim ("You marked rows as dynamic"), the guards name the input's dimension; the finding is at
the line that pinned it, with no rewrite made for another construct."""

import torch
from torch.export import Dim

EXPECTED = {"eager": "pass", "export": "fail"}
EXPECTED_FINDINGS = [{"stage": "export", "kind": "dynamic-shape", "line": "assert x.shape[0] == 4",
                      "rewrite": False}]


class FourRows(torch.nn.Module):
    def forward(self, x):
        assert x.shape[0] == 4, "four rows"
        return x * 2


def get_model():
    return FourRows()


def get_inputs():
    return [torch.randn(4, 3), torch.randn(4, 5)]


def get_dynamic_shapes():
    return ({0: Dim("rows")},)
