"""A 0-d tensor output (`x.sum()`): onnxruntime returns it with shape (), and so must the comparison."""

import torch

EXPECTED = {"eager": "pass", "export": "pass", "jit_trace": "pass", "onnx_export": "pass", "onnxruntime": "pass"}
EXPECTED_FINDINGS = []


class Total(torch.nn.Module):
    def forward(self, x):
        return (x * 2).sum()


def get_model():
    return Total()


def get_inputs():
    return [torch.randn(2, 3), torch.randn(4, 3)]
