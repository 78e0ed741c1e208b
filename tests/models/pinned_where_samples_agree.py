"""Both samples have batch 3, but get_dynamic_shapes() declares the batch dynamic: the trace keeps the
3 that int() read, which only the sweep's other batch sizes show."""

import torch
from torch.export import Dim

EXPECTED = {"eager": "pass", "jit_trace": "fail"}
EXPECTED_FINDINGS = [{"stage": "jit_trace", "kind": "dynamic-shape", "line": "n = int(x.shape[0])"}]
EXPECTED_SWEPT = ["batch 1", "batch 5", "batch 4"]  # 4: just past the 3 the code pins


class Rows(torch.nn.Module):
    def forward(self, x):
        n = int(x.shape[0])
        return x.reshape(n, -1).sum(1)


def get_model():
    return Rows()


def get_inputs():
    return [torch.randn(3, 4), torch.randn(3, 4) * 2]


def get_dynamic_shapes():
    return ({0: Dim.DYNAMIC},)
