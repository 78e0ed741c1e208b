"""A branch on the length at 64, with the length declared up to 1024 and samples of 8 and 12: the
trace keeps the short path, wrong past 64, a size the samples' neighbours never reach."""

import torch

MECHANISM = "the sweep"
EXPECTED = {"jit_trace": "mismatch"}
REASON = {"jit_trace": ["output output", "at ("]}
PLAIN_SIZE = [3, 100]  # fresh values past the branch at 64, for the plain script


class Long(torch.nn.Module):
    def forward(self, x):
        if x.shape[1] > 64:
            return x.cumsum(dim=1) / x.shape[1]
        return x.cumsum(dim=1)


def get_model():
    return Long()


def get_inputs():
    torch.manual_seed(0)
    return [torch.randn(2, 8), torch.randn(3, 12)]


def get_dynamic_shapes():
    return ({0: torch.export.Dim("batch", max=64), 1: torch.export.Dim("length", min=2, max=1024)},)
