"""A forward that writes a parameter in place: autograd refuses that, so exporting it with grad mode on
fails, while the deployer's recipe (under torch.no_grad()) exports it."""

import torch

EXPECTED = {"eager": "pass", "export": "pass", "onnx_export": "pass", "onnxruntime": "pass"}
EXPECTED_FINDINGS = []


class Renormalize(torch.nn.Module):
    def __init__(self):
        super().__init__()
        self.weight = torch.nn.Parameter(torch.randn(3, 3))

    def forward(self, x):
        self.weight.div_(self.weight.norm())
        return x @ self.weight


def get_model():
    return Renormalize()


def get_inputs():
    return [torch.randn(2, 3), torch.randn(4, 3)]
