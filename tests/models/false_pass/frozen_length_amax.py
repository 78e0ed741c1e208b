"""The trace freezes `n = int(x.shape[1])` and takes the max over the first n positions: at a longer
length it still looks at the first n only. Tiled copies of the sample have the same maximum there;
fresh values do not."""

import torch

MECHANISM = "the sweep"
EXPECTED = {"jit_trace": "mismatch"}
REASON = {"jit_trace": ["output output", "at ("]}
PLAIN_SIZE = [3, 16]  # fresh values past the samples' length, for the plain script


class Pool(torch.nn.Module):
    def forward(self, x):
        n = int(x.shape[1])
        return x[:, :n].amax(dim=1) + x.mean(dim=1)


def get_model():
    return Pool()


def get_inputs():
    torch.manual_seed(0)
    return [torch.randn(2, 4), torch.randn(3, 4)]


def get_dynamic_shapes():
    length = torch.export.Dim("length", min=2, max=64)
    return ({1: length},)
