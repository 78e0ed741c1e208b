"""Allocates 256 MiB blocks until allocation fails, while torch.jit.trace runs. torch.empty reserves the
address space without touching it, so the limit is reached whatever memory the machine has free."""

import torch


class HogsMemoryWhenTraced(torch.nn.Module):
    def forward(self, x):
        if torch.jit.is_tracing():
            blocks = []
            while True:
                blocks.append(torch.empty(64, 1024, 1024))
        return x * 2


def get_model():
    return HogsMemoryWhenTraced()


def get_inputs():
    return [torch.ones(2, 3), torch.ones(4, 3)]
