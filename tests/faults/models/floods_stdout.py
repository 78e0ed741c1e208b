"""Prints about 4 MB to stdout and stderr on every call."""

import sys

import torch

LINE = "x" * 1023


class Floods(torch.nn.Module):
    def forward(self, x):
        for _ in range(2048):
            print(LINE)
            print(LINE, file=sys.stderr)
        return x + 1


def get_model():
    return Floods()


def get_inputs():
    return [torch.ones(2, 3), torch.ones(4, 3)]
