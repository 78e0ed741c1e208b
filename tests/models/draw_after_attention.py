"""Attention, then a random draw: the draw is what varies with the seed. Scaled-dot-product attention
runs first and carries torch's nondeterministic_seeded tag (it would draw with dropout_p > 0); the
finding must name the op that draws, at its line."""

import torch
import torch.nn.functional as F


class NoisyAttention(torch.nn.Module):
    def __init__(self):
        super().__init__()
        self.qkv = torch.nn.Linear(8, 24)

    def forward(self, x):
        q, k, v = self.qkv(x).unflatten(-1, (6, 4)).transpose(1, 2).chunk(3, dim=1)
        x = F.scaled_dot_product_attention(q, k, v).transpose(1, 2).flatten(2)
        return x + 0.1 * torch.randn_like(x)


def get_model():
    return NoisyAttention().eval()


def get_inputs():
    return [torch.randn(2, 5, 8)]
