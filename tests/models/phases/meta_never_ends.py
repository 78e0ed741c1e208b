"""A forward that never ends on the meta device (where eager's device check runs it), and answers at
once everywhere else. It waits in Python, a nap at a time, as a loop polling for something would: the
check's budget must stop it inside the worker without taking a core from the rest of the suite."""

import time

import torch


class WaitsOnMeta(torch.nn.Module):
    def forward(self, x):
        while x.device.type == "meta":
            time.sleep(0.05)
        return torch.relu(x) + 1


def get_model():
    return WaitsOnMeta()


def get_inputs():
    return [torch.randn(2, 3)]
