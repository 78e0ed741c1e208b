"""Boxes whose first column is an area (about 4e8) and whose second a score: the trace freezes the
branch that zeroes the scores, so it returns scores where eager has 0. An RMS over the whole tensor
is dominated by the areas' float noise and hides the scores."""

import torch

MECHANISM = "an average hides an error"
EXPECTED = {"jit_trace": "mismatch"}
REASON = {"jit_trace": ["output output", "at ("]}


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
