"""The ONNX export with dynamo=True fails (the forward refuses to be exported); the first recipe that
gets past it, the TorchScript-based exporter, traces a forward that then loops forever in Python."""

import time

import torch


class RefusesExport(torch.nn.Module):
    def forward(self, x):
        if torch.compiler.is_exporting():
            raise RuntimeError("this forward refuses to be exported")
        while torch.jit.is_tracing():
            time.sleep(0.05)
        return x * 2


def get_model():
    return RefusesExport()


def get_inputs():
    return [torch.randn(2, 3)]
