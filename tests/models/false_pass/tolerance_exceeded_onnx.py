"""A per-output TOLERANCE of atol 1e-3 on `y`; the TorchScript-based ONNX exporter freezes a branch that
moves one value of a thousand by 1.3e-3 (relative 0.5): onnxruntime is beyond the user's bound."""

import torch

MECHANISM = "the user's tolerance"
EXPECTED = {"onnxruntime": "mismatch"}
REASON = {"onnxruntime": ["output y", "at (0, 0)"]}
TOLERANCE = {"y": {"atol": 1e-3}}
OPTIONS = ["--onnx-exporter", "legacy"]


class Nudge(torch.nn.Module):
    def forward(self, x):
        y = x * 2.6e-3
        if x[0, 0] > 0:
            y = y + torch.nn.functional.pad(y[:1, :1] * 0.5, (0, y.shape[1] - 1, 0, y.shape[0] - 1))
        return {"y": y}


def get_model():
    return Nudge()


def get_inputs():
    torch.manual_seed(0)
    first = torch.rand(40, 25) * 0.1 + 0.9
    second = torch.rand(40, 25) * 0.1 + 0.9
    second[0, 0] = -1.0
    return [first, second]
