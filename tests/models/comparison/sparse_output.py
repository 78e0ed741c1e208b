"""Class 9: a sparse COO output and a complex output with the lazy conjugate bit. compatcheck reads both
by value: eager passes, and torch.jit.trace's artifact, which returns the same values, passes too."""

import torch

EXPECTED = {"eager": "pass", "jit_trace": "pass"}


class Sparse(torch.nn.Module):
    def forward(self, x):
        return (torch.relu(x).to_sparse(), torch.complex(x, x.flip(-1)).to(torch.complex128).conj())


def get_model():
    return Sparse()


def get_inputs():
    torch.manual_seed(0)
    return torch.randn(3, 4)
