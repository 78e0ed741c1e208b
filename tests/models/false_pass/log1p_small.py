"""log1p of values near 5e-8: the ONNX graph computes Log(1 + x), which is 0 in float32 for most of
them. Every error is under atol 1e-5, yet each is 100% of the value, and eager gets them right."""

import torch

MECHANISM = "a relative error under atol"
EXPECTED = {"onnxruntime": "mismatch"}
REASON = {"onnxruntime": ["output output", "at ("]}


class Log1p(torch.nn.Module):
    def forward(self, x):
        return torch.log1p(x)


def get_model():
    return Log1p()


def get_inputs():
    torch.manual_seed(0)
    return [torch.rand(4, 8) * 8e-8 + 2e-8, torch.rand(4, 8) * 8e-8 + 2e-8]
