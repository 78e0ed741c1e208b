"""A model called with positional and keyword arguments together, `model(x, y, mask=m)`: spelled
`compatcheck.Call(x, y, mask=m)` in get_inputs()."""

import torch

from compatcheck import Call

EXPECTED = {"eager": "pass", "export": "pass", "jit_trace": "pass", "onnx_export": "pass", "onnxruntime": "pass"}
EXPECTED_FINDINGS = []


class Gate(torch.nn.Module):
    def forward(self, x, y, mask=None):
        return (x + y) * mask


def get_model():
    return Gate()


def get_inputs():
    return [Call(torch.randn(2, 3), torch.randn(2, 3), mask=torch.ones(2, 3)),
            Call(torch.randn(4, 3), torch.randn(4, 3), mask=torch.zeros(4, 3))]
