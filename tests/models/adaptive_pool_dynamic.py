"""AdaptiveAvgPool2d(2) on images whose height and width vary: the ONNX exporter (torch 2.13) lowers the
pool for the sample's size, so onnxruntime answers otherwise at the other size, with every onnxruntime
optimization on or off."""

import torch
from torch import nn


class Head(nn.Module):
    def __init__(self):
        super().__init__()
        self.conv = nn.Conv2d(3, 4, 3, padding=1)
        self.pool = nn.AdaptiveAvgPool2d(2)
        self.fc = nn.Linear(16, 10)

    def forward(self, images):
        h = self.pool(torch.relu(self.conv(images)))
        return self.fc(h.flatten(1))


def get_model():
    return Head().eval()


def get_inputs():
    return [torch.randn(2, 3, 16, 16), torch.randn(4, 3, 20, 20)]
