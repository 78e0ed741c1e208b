"""Layer norm, GELU and a residual over features of mixed sizes, with values near zero where large
terms cancel: the rounding noise of a transformer block, which every backend rounds otherwise."""

import torch

EXPECTED = {"jit_trace": "pass", "export": "pass", "onnxruntime": "pass"}


class Block(torch.nn.Module):
    def __init__(self):
        super().__init__()
        self.norm = torch.nn.LayerNorm(96)
        self.up = torch.nn.Linear(96, 384)
        self.down = torch.nn.Linear(384, 96)

    def forward(self, x):
        return x + self.down(torch.nn.functional.gelu(self.up(self.norm(x)))) - x.mean(-1, keepdim=True)


def get_model():
    torch.manual_seed(0)
    return Block()


def get_inputs():
    torch.manual_seed(0)
    return [torch.randn(2, 10, 96) * 4, torch.randn(3, 7, 96) * 4]
