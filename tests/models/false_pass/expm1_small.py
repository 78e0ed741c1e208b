"""expm1 beside a larger output: the ONNX graph computes Exp(x) - 1, which loses every digit of values
near 1e-8 in float32; the other output is right, and every error is under atol."""

import torch

MECHANISM = "a relative error under atol"
EXPECTED = {"onnxruntime": "mismatch"}
REASON = {"onnxruntime": ["output rate", "at ("]}


class Rate(torch.nn.Module):
    def forward(self, x):
        return {"scale": x * 1e8, "rate": torch.expm1(x)}


def get_model():
    return Rate()


def get_inputs():
    torch.manual_seed(0)
    return [torch.rand(4, 8) * 3e-8, torch.rand(4, 8) * 3e-8]
