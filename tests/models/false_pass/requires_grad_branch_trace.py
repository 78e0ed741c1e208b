"""A path for inputs that require grad (the input sets do), under a data-dependent branch that the trace
freezes on input set 1. A float64 run whose inputs lost requires_grad takes the frozen path too, and
would call the trace's answer right."""

import torch

MECHANISM = "the float64 run's path"
EXPECTED = {"jit_trace": "mismatch"}
REASON = {"jit_trace": ["output output", "at ("]}


class GradAware(torch.nn.Module):
    def forward(self, x):
        if x.requires_grad and x.mean() > 0:
            return x.sin() + 0.5
        return x.sin()


def get_model():
    return GradAware()


def get_inputs():
    torch.manual_seed(1)
    return [(-torch.rand(3, 4) - 0.1).requires_grad_(), (torch.rand(4, 4) + 0.1).requires_grad_()]
