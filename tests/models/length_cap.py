"""A positional table of 16 entries caps the sequence length: the sweep names the cap and sweeps no
length beyond it, so nothing fails falsely."""

import torch

EXPECTED = {"eager": "pass", "export": "pass", "jit_trace": "pass", "onnx_export": "pass", "onnxruntime": "pass"}
EXPECTED_FINDINGS = []
EXPECTED_SWEPT = ["batch 1", "batch 5", "ids.shape[1] = 5", "ids.shape[1] = 13"]
EXPECTED_CAPS = {"ids.shape[1]": 16}


class Positions(torch.nn.Module):
    def __init__(self):
        super().__init__()
        self.tokens = torch.nn.Embedding(50, 8)
        self.positions = torch.nn.Embedding(16, 8)

    def forward(self, ids):
        return self.tokens(ids) + self.positions(torch.arange(ids.shape[1]))


def get_model():
    return Positions()


def get_inputs():
    return [torch.randint(0, 50, (2, 6)), torch.randint(0, 50, (3, 9))]
