"""A dim declared dynamic in get_dynamic_shapes() that the code computes with in a way torch cannot prove
for every size (`round(x.shape[0] / 2)`): torch.export refuses the declaration ("Constraints violated");
the finding keeps torch's cause (the guard) and the line."""

import torch
from torch.export import Dim

EXPECTED = {"eager": "pass", "export": "fail"}
EXPECTED_FINDINGS = [{"stage": "export", "kind": "dynamic-shape", "line": "return x[: round(x.shape[0] / 2)] * 2"}]


class Half(torch.nn.Module):
    def forward(self, x):
        return x[: round(x.shape[0] / 2)] * 2


def get_model():
    return Half()


def get_inputs():
    return [torch.randn(6, 3), torch.randn(10, 3)]


def get_dynamic_shapes():
    return ({0: Dim("batch")},)
