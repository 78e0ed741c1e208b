"""Class 4: an output class that subclasses dict (a library's ModelOutput-like class pytree does not know),
with a branch only torch.compile takes, 0.4 off. A plain script: torch.compile(model)(x)["logits"] differs
from eager's by 0.4."""

import torch

EXPECTED = {"eager": "pass", "compile": "mismatch"}


class Output(dict):
    pass


class Head(torch.nn.Module):
    def forward(self, x):
        y = x * 2
        if torch.compiler.is_compiling():
            y = y + 0.4
        return Output(logits=y)


def get_model():
    return Head()


def get_inputs():
    torch.manual_seed(0)
    return torch.randn(2, 3)
