"""A cache held on the module, as a KV cache is: every call appends to it and reads all of it."""

import torch


class Cached(torch.nn.Module):
    def __init__(self):
        super().__init__()
        self.history = []

    def forward(self, x):
        self.history.append(x.detach())
        return x - torch.stack(self.history).mean(0)


def get_model():
    return Cached()


def get_inputs():
    return [torch.randn(2, 3) + 5, torch.randn(2, 3) - 5]
