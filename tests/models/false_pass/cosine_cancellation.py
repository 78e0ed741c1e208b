"""1 - cos(x) for small x: float32 cancels every digit, so eager's answer is far from float64, and
onnxruntime's cosine, rounded otherwise, gives other digits."""

import torch

MECHANISM = "numerically unstable"
EXPECTED = {"onnxruntime": "mismatch"}
REASON = {"onnxruntime": ["output output", "at (", "unstable"]}


class Versine(torch.nn.Module):
    def forward(self, x):
        return torch.log((1 - torch.cos(x)).clamp_min(1e-30))


def get_model():
    return Versine()


def get_inputs():
    torch.manual_seed(0)
    return [torch.rand(4, 16) * 3e-3 + 1e-4, torch.rand(4, 16) * 3e-3 + 1e-4]
