"""A torch.ao dynamically quantized LSTM and Linear: the LSTM keeps its packed weights as ScriptObjects in
its state_dict."""

import torch
from torch import nn


class Net(nn.Module):
    def __init__(self):
        super().__init__()
        self.lstm = nn.LSTM(8, 16, batch_first=True)
        self.fc = nn.Linear(16, 4)

    def forward(self, x):
        out, _ = self.lstm(x)
        return self.fc(out[:, -1])


def get_model():
    return torch.ao.quantization.quantize_dynamic(Net().eval(), {nn.Linear, nn.LSTM}, dtype=torch.qint8)


def get_inputs():
    return [torch.randn(2, 5, 8), torch.randn(3, 5, 8)]
