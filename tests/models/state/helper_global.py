"""A global of a helper module from the model's own folder, changed in forward."""

import torch

import anneal_schedule


class Tempered(torch.nn.Module):
    def forward(self, x):
        return torch.softmax(x / anneal_schedule.temperature(), dim=-1)


def get_model():
    return Tempered()


def get_inputs():
    return [torch.randn(2, 6) * 3, torch.randn(2, 6) * 3]
