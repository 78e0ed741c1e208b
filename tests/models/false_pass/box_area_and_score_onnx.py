"""The same boxes through the TorchScript-based ONNX exporter, which traces too: onnxruntime returns
scores where eager has 0, beside areas of about 4e8."""

import torch

MECHANISM = "an average hides an error"
EXPECTED = {"onnxruntime": "mismatch"}
REASON = {"onnxruntime": ["output output", "at ("]}
OPTIONS = ["--onnx-exporter", "legacy"]


class Boxes(torch.nn.Module):
    def forward(self, wh, logits):
        area = wh[:, 0] * wh[:, 1] * 1.0001
        score = torch.sigmoid(logits) if logits.mean() > 0 else torch.zeros_like(logits)
        return torch.stack([area, score], dim=1)


def get_model():
    return Boxes()


def get_inputs():
    torch.manual_seed(0)
    wh = torch.full((6, 2), 2.0e4) + torch.rand(6, 2) * 100
    return [(wh, torch.rand(6) + 0.5), (wh.flip(0), -torch.rand(6) - 1.5)]
