"""A noisy sample beside a deterministic score: the score is compared by value everywhere and agrees;
the sample varies with the seed in every artifact that keeps the draw."""

import torch

EXPECTED = {"jit_trace": "pass", "export": "pass", "onnxruntime": "pass"}


class Noisy(torch.nn.Module):
    def __init__(self):
        super().__init__()
        self.head = torch.nn.Linear(6, 3)

    def forward(self, x):
        score = torch.tanh(self.head(x))
        return score, score + 0.1 * torch.randn_like(score)


def get_model():
    torch.manual_seed(0)
    return Noisy()


def get_inputs():
    torch.manual_seed(0)
    return [torch.randn(2, 6), torch.randn(5, 6)]
