"""A forward that refuses input set 2, as a library checks its input's size (torchvision's RAFT wants 128
pixels): eager fails with the model's own error, and nothing is compared with it."""

import torch


class RefusesLargeBatches(torch.nn.Module):
    def forward(self, x):
        if x.shape[0] > 3:
            raise ValueError(f"batches of at most 3 are supported; got {x.shape[0]}")
        return x * 2


def get_model():
    return RefusesLargeBatches()


def get_inputs():
    return [torch.ones(2, 3), torch.ones(4, 3)]
