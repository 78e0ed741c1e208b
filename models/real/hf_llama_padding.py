"""Llama (transformers) with left padding: prompts of different lengths padded on the left, as
batched generation does. Tiny config, random weights, nothing downloaded."""

import torch
from torch import nn
from transformers import LlamaConfig, LlamaForCausalLM

VOCAB = 128


class Generator(nn.Module):
    def __init__(self):
        super().__init__()
        config = LlamaConfig(vocab_size=VOCAB, hidden_size=32, intermediate_size=64, num_hidden_layers=2,
                             num_attention_heads=4, num_key_value_heads=2, max_position_embeddings=64,
                             use_cache=False)
        self.lm = LlamaForCausalLM(config)

    def forward(self, input_ids, attention_mask):
        return self.lm(input_ids=input_ids, attention_mask=attention_mask).logits


def get_model():
    return Generator().eval()


def _left_padded(lengths, total):
    ids = torch.randint(1, VOCAB, (len(lengths), total))
    mask = torch.ones(len(lengths), total, dtype=torch.long)
    for row, length in enumerate(lengths):
        ids[row, : total - length] = 0
        mask[row, : total - length] = 0
    return {"input_ids": ids, "attention_mask": mask}


def get_inputs():
    return [_left_padded([8, 5], 8), _left_padded([6, 3, 6], 6)]
