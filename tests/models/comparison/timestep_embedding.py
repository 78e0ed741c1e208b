"""Class 8: a diffusion transformer's timestep embedding (sin and cos of timestep × frequency, arguments
near 1000, then an MLP). onnxruntime's kernels round other elements than eager's, each as near float64 as
eager is at that magnitude. A plain script: onnxruntime's answer for torch.onnx.export(model, (t,),
dynamo=True) against model(t) passes torch.testing.assert_close."""

import math

import torch

EXPECTED = {"eager": "pass", "onnx_export": "pass", "onnxruntime": "pass"}


class TimestepEmbedding(torch.nn.Module):
    def __init__(self, channels: int = 256):
        super().__init__()
        self.half = channels // 2
        self.mlp = torch.nn.Sequential(torch.nn.Linear(channels, channels), torch.nn.SiLU(),
                                       torch.nn.Linear(channels, channels))

    def forward(self, timesteps):
        freqs = torch.exp(-math.log(10000) * torch.arange(self.half, dtype=timesteps.dtype) / self.half)
        args = timesteps[:, None] * freqs[None]
        embedding = torch.cat([torch.cos(args), torch.sin(args)], dim=-1)
        return embedding, self.mlp(embedding)


def get_model():
    torch.manual_seed(0)
    return TimestepEmbedding().eval()


def get_inputs():
    return [torch.tensor([999.0, 981.0, 961.0, 940.0]), torch.tensor([1.0, 250.0, 500.0, 999.0])]
