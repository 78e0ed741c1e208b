"""A Python counter that anneals a temperature on every call: eager's calls differ from each other, and
the exported program bakes the temperature of the call it was traced on."""

import torch


class Annealed(torch.nn.Module):
    def __init__(self):
        super().__init__()
        self.calls = 0

    def forward(self, x):
        self.calls += 1
        return torch.softmax(x / (1.0 + 0.05 * self.calls), dim=-1)


def get_model():
    return Annealed()


def get_inputs():
    torch.manual_seed(0)
    return [torch.randn(2, 6) * 3, torch.randn(2, 6) * 3]
