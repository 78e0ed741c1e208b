"""A sampler's draw beside its top-k: onnxruntime draws other numbers than torch (not comparable), but
the top-k indices depend on no draw, and where scores tie onnxruntime picks other indices than torch."""

import torch

MECHANISM = "random outputs"
EXPECTED = {"onnxruntime": "mismatch"}
REASON = {"onnxruntime": ["output 1", "at ("]}
PLAIN_OUTPUTS = [1]  # the draw differs by design; the plain script compares the top-k


class Sampler(torch.nn.Module):
    def forward(self, logits):
        probs = torch.softmax(logits, dim=-1)
        drawn = torch.multinomial(probs, 1)
        return drawn, torch.topk(logits.round(), 2, dim=-1).indices


def get_model():
    return Sampler()


def get_inputs():
    torch.manual_seed(3)
    return [torch.randn(4, 8) * 0.4, torch.randn(4, 8) * 0.4]
