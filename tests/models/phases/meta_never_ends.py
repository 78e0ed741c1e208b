"""A forward that never ends on the meta device (where eager's device check runs it), and answers at
once everywhere else."""

import torch


class WaitsOnMeta(torch.nn.Module):
    def forward(self, x):
        while x.device.type == "meta":
            pass
        return torch.relu(x) + 1


def get_model():
    return WaitsOnMeta()


def get_inputs():
    return [torch.randn(2, 3)]
