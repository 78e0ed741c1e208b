"""Allocates 256 MiB blocks until allocation fails, while torch.jit.trace runs."""

import torch


class HogsMemoryWhenTraced(torch.nn.Module):
    def forward(self, x):
        if torch.jit.is_tracing():
            blocks = []
            while True:
                blocks.append(torch.ones(64, 1024, 1024))
        return x * 2


def get_model():
    return HogsMemoryWhenTraced()


def get_inputs():
    return [torch.ones(2, 3), torch.ones(4, 3)]
