"""A detector's output: one dict per image, as torchvision's detectors return. jit.trace refuses a list of
dicts; a wrapper that returns the tensors flat traces, and the structure is rebuilt outside."""

import torch


class Detect(torch.nn.Module):
    def __init__(self):
        super().__init__()
        self.head = torch.nn.Linear(4, 5)

    def forward(self, x):
        out = self.head(x)
        return [{"boxes": out[i, :4].sigmoid(), "score": out[i, 4:].sigmoid()} for i in range(2)]


def get_model():
    return Detect().eval()


def get_inputs():
    return [torch.randn(2, 4), torch.randn(2, 4) * 3]
