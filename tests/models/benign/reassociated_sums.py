"""Long sums and matrix products whose order onnxruntime and the trace choose otherwise: float32
rounding noise, of the size eager's own rounding makes, in every output element."""

import torch

EXPECTED = {"jit_trace": "pass", "onnxruntime": "pass"}


class Sums(torch.nn.Module):
    def __init__(self):
        super().__init__()
        self.proj = torch.nn.Linear(512, 64)

    def forward(self, x):
        h = self.proj(x * 30)
        return h.sum(-1), h - h.mean(-1, keepdim=True), h @ h.T / 64


def get_model():
    torch.manual_seed(0)
    return Sums()


def get_inputs():
    torch.manual_seed(1)
    return [torch.randn(8, 512), torch.randn(3, 512)]
