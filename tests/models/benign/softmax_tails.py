"""A softmax over logits of very different sizes: probabilities down to 1e-30 and below, which
onnxruntime computes with its own exp, and flushes to zero where they are subnormal."""

import torch

EXPECTED = {"jit_trace": "pass", "onnxruntime": "pass"}


class Tails(torch.nn.Module):
    def forward(self, logits):
        return torch.softmax(logits * 12, dim=-1), torch.log_softmax(logits, dim=-1)


def get_model():
    return Tails()


def get_inputs():
    torch.manual_seed(0)
    return [torch.randn(4, 100) * 2, torch.randn(2, 100) * 2]
