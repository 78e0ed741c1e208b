"""A sample drawn around a mean that a data-dependent branch decides: the trace freezes the branch of
input set 1, so `mu` (output 1) is wrong on input set 2, and `z`, drawn around it, too."""

import torch

MECHANISM = "random outputs"
EXPECTED = {"jit_trace": "mismatch"}
REASON = {"jit_trace": ["output 0", "at ("]}


class Sampler(torch.nn.Module):
    def forward(self, x):
        mu = x * 2 if x.sum() > 0 else x - 3
        return mu + torch.randn_like(mu), mu


def get_model():
    return Sampler()


def get_inputs():
    return [torch.rand(2, 3) + 0.1, -torch.rand(2, 3) - 0.1]
