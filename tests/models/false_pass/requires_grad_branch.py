"""A path for inputs that require grad (the input sets do), under a data-dependent branch that the
TorchScript-based ONNX exporter freezes on input set 1. A float64 run whose inputs lost requires_grad
takes the frozen path too, and would call onnxruntime's answer right."""

import torch

MECHANISM = "the float64 run's path"
EXPECTED = {"onnxruntime": "mismatch"}
REASON = {"onnxruntime": ["output output", "at ("]}
OPTIONS = ["--onnx-exporter", "legacy"]


class GradAware(torch.nn.Module):
    def forward(self, x):
        if x.requires_grad and x.mean() > 0:
            return torch.tanh(x) * 1.5
        return torch.tanh(x)


def get_model():
    return GradAware()


def get_inputs():
    torch.manual_seed(0)
    return [(-torch.rand(3, 4) - 0.1).requires_grad_(), (torch.rand(3, 4) + 0.1).requires_grad_()]
