"""Every export of it (torch.export, both ONNX exporters) takes a few seconds and then fails: the recipes
onnx_export tries after its own failure cost as much, and run under --diagnose-budget, never the stage's verdict."""

import time

import torch
from torch import nn


class ExportsSlowlyThenFails(nn.Module):
    def __init__(self):
        super().__init__()
        self.fc = nn.Linear(4, 4)

    def forward(self, x):
        if torch.compiler.is_exporting() or torch.onnx.is_in_onnx_export():
            time.sleep(4)
            raise RuntimeError("this model cannot be exported")
        return self.fc(x)


def get_model():
    return ExportsSlowlyThenFails()


def get_inputs():
    return [torch.randn(2, 4), torch.randn(3, 4)]
