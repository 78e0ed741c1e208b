"""A Conv wrapped in quantize/dequantize pairs, as quantization-aware training leaves it. onnxruntime
1.32 fuses the pairs into QLinearConv at ORT_ENABLE_EXTENDED; the integer path and the float one (and
eager, and onnx.reference) round differently where a value sits on a rounding edge, one quantum apart,
at every level; eager, onnxruntime and onnx.reference each land on another side of some edges, so
none is blamed alone. The dynamo exporter cannot export fake quantization with a dynamic
batch (torch 2.13): the test exports with the legacy exporter."""

import torch
from torch import nn


def _fake_quantized(t: torch.Tensor, scale: float) -> torch.Tensor:
    return torch.fake_quantize_per_tensor_affine(t, scale, 0, -128, 127)


class QuantizedConv(nn.Module):
    def __init__(self):
        super().__init__()
        self.conv = nn.Conv2d(8, 16, 3, padding=1, bias=False)

    def forward(self, x):
        y = nn.functional.conv2d(_fake_quantized(x, 0.05), _fake_quantized(self.conv.weight, 0.01), padding=1)
        return _fake_quantized(y, 0.1)


def get_model():
    torch.manual_seed(0)
    return QuantizedConv().eval()


def get_inputs():
    torch.manual_seed(0)
    return [torch.randn(2, 8, 16, 16), torch.randn(3, 8, 16, 16)]
