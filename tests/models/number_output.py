"""A forward that returns a Python number beside a tensor (`x.shape[1] + 1`), which torch.export supports:
compared by value."""

import torch

EXPECTED = {"eager": "pass", "export": "pass", "jit_script": "pass", "onnx_export": "fail"}
EXPECTED_FINDINGS = []


class WithWidth(torch.nn.Module):
    def forward(self, x):
        return x * 2, x.shape[1] + 1


def get_model():
    return WithWidth()


def get_inputs():
    return [torch.randn(2, 3), torch.randn(4, 3)]
