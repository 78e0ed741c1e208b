"""Called by keywords, as transformers models are, and returning a dict with a dataclass in it: jit.trace
refuses both, and a `**kwargs` wrapper cannot be traced from keywords, so the flat wrapper names each."""

from dataclasses import dataclass

import torch


@dataclass
class Hidden:
    last: torch.Tensor


class Encode(torch.nn.Module):
    def __init__(self):
        super().__init__()
        self.embed = torch.nn.Linear(4, 3)

    def forward(self, input_ids, attention_mask=None):
        hidden = self.embed(input_ids) * attention_mask.unsqueeze(-1)
        return {"logits": hidden.sum(-1), "hidden": Hidden(last=hidden)}


def get_model():
    return Encode().eval()


def get_inputs():
    return [{"input_ids": torch.randn(2, 5, 4), "attention_mask": torch.ones(2, 5)},
            {"input_ids": torch.randn(3, 7, 4), "attention_mask": torch.zeros(3, 7)}]
