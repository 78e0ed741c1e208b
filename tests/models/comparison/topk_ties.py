"""Class 6: topk over ReLU outputs, where zeros tie: onnxruntime returns the tied indices in another
order, equally valid, the gathered values identical. A plain script: torch.topk(relu(x), 6) against
onnxruntime's TopK differs in indices only where the values are equal."""

import torch

EXPECTED = {"eager": "pass", "onnx_export": "pass", "onnxruntime": "pass"}


class Top(torch.nn.Module):
    def forward(self, x):
        return torch.topk(torch.relu(x - 0.5), 6)


def get_model():
    return Top()


def get_inputs():
    torch.manual_seed(0)
    return torch.randn(8, 16)
