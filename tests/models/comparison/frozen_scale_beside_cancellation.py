"""Class 1: one element of the output cancels (eager is far from its float64 value there), and the trace
froze the scale every other element is divided by, 5% off on the second input set. A plain script:
torch.jit.trace(model, x1)(x2) against model(x2) is 0.05 off on the larger elements."""

import torch

EXPECTED = {"eager": "pass", "jit_trace": "mismatch"}


class Scaled(torch.nn.Module):
    def forward(self, x):
        scale = float(x.abs().max())  # a Python number: the trace keeps input set 1's
        cancels = (x[:1] * 3e7 + 0.3) - x[:1] * 3e7  # 0.3 in float64, 0.5 in float32: eager 0.2 off
        return torch.cat([cancels, x[1:] / scale])


def get_model():
    return Scaled()


def get_inputs():
    x = torch.linspace(0.2, 1.0, 44)
    return [x, x * torch.cat([torch.ones(43), torch.tensor([1.05])])]
