"""The model file's TOLERANCE is atol 1e-3; the trace freezes a branch that moves one value of a
thousand by 1.3e-3 (relative 0.5). The tolerance is a bound, whatever the other values do."""

import torch

MECHANISM = "the user's tolerance"
EXPECTED = {"jit_trace": "mismatch"}
REASON = {"jit_trace": ["output output", "at (0, 0)"]}
TOLERANCE = {"atol": 1e-3}


class Nudge(torch.nn.Module):
    def forward(self, x):
        y = x * 2.6e-3
        if x[0, 0] > 0:
            y[0, 0] = y[0, 0] * 1.5
        return y


def get_model():
    return Nudge()


def get_inputs():
    torch.manual_seed(0)
    first = torch.rand(40, 25) * 0.1 + 0.9
    second = torch.rand(40, 25) * 0.1 + 0.9
    second[0, 0] = -1.0
    return [first, second]
