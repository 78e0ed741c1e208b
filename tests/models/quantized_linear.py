"""A torch.ao dynamically quantized Linear: its state_dict holds a torch.dtype and a tuple of a quantized
weight and a bias beside its tensors."""

import torch
from torch import nn


class Net(nn.Module):
    def __init__(self):
        super().__init__()
        self.fc = nn.Linear(8, 4)

    def forward(self, x):
        return torch.relu(self.fc(x))


def get_model():
    return torch.ao.quantization.quantize_dynamic(Net().eval(), {nn.Linear}, dtype=torch.qint8)


def get_inputs():
    return [torch.randn(2, 8), torch.randn(3, 8)]
