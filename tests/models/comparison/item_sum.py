"""Class 7: a float32 sum returned as a Python number. onnxruntime sums in another order than
eager's kernel: 4.6e-5 apart on a sum of 39.45, a few float32 rounding steps, which is noise at float32's
tolerance. A plain script: onnxruntime's answer for torch.onnx.export(model, (x,), dynamo=True) against
model(x) passes torch.testing.assert_close (float32: rtol 1.3e-6, atol 1e-5)."""

import torch

EXPECTED = {"eager": "pass", "onnx_export": "pass", "onnxruntime": "pass"}


class Total(torch.nn.Module):
    def forward(self, x):
        return (x * 1.0001).sum().item()


def get_model():
    return Total()


def get_inputs():
    torch.manual_seed(0)
    return torch.randn(4096)
