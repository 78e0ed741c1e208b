"""A module-level global of the model file, bumped in forward."""

import torch

STEP = 0


class Stepped(torch.nn.Module):
    def forward(self, x):
        global STEP
        STEP += 1
        return x * STEP


def get_model():
    return Stepped()


def get_inputs():
    return [torch.randn(2, 3), torch.randn(2, 3)]
