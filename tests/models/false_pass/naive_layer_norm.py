"""A hand-written layer norm, E[x^2] - E[x]^2, on data offset by 300: float32 cancels away most digits,
so eager itself is far from float64, and onnxruntime, which sums in another order, differs from it."""

import torch

MECHANISM = "numerically unstable"
EXPECTED = {"onnxruntime": "mismatch"}
REASON = {"onnxruntime": ["output output", "at (", "unstable"]}


class NaiveNorm(torch.nn.Module):
    def forward(self, x):
        mean = x.mean(-1, keepdim=True)
        var = (x * x).mean(-1, keepdim=True) - mean * mean
        return (x - mean) / torch.sqrt(var.clamp_min(1e-12))


def get_model():
    return NaiveNorm()


def get_inputs():
    torch.manual_seed(0)
    return [torch.randn(4, 64) * 0.05 + 300, torch.randn(4, 64) * 0.05 + 300]
