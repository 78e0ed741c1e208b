"""A complex output: the ONNX graph returns it as (real, imaginary) pairs in a last dimension of 2."""

import torch

EXPECTED = {"eager": "pass", "export": "pass", "onnx_export": "pass", "onnxruntime": "pass"}
EXPECTED_FINDINGS = []


class Spectrum(torch.nn.Module):
    def forward(self, x):
        return torch.fft.rfft(x)


def get_model():
    return Spectrum()


def get_inputs():
    return [torch.randn(2, 8), torch.randn(3, 8)]
