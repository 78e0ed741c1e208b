"""Fails while traced with a message quoting secrets: an environment variable's value and token-shaped strings."""

import os

import torch

QUOTED = " ".join([
    os.environ["MY_API_SECRET"],
    "ghp_" + "A1b2C3d4E5f6G7h8I9j0K1l2M3n4O5p6Q7r8",
    "hf_" + "AbCdEfGhIjKlMnOpQrStUvWxYz012345",
    "sk-" + "proj-AbCdEfGhIjKlMnOpQrStUvWx0123",
    "AKIA" + "ABCDEFGHIJKLMNOP",
    "http://admin:" + "hunter2pw@triton.internal:8000",
])


class LeaksSecret(torch.nn.Module):
    def forward(self, x):
        if torch.jit.is_tracing():
            raise ValueError(f"cannot reach the registry with {QUOTED}")
        return x * 2


def get_model():
    return LeaksSecret()


def get_inputs():
    return torch.ones(2, 3)
