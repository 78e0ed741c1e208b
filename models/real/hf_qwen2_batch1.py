"""Qwen2 (transformers) exported from a batch of one: the first input set has batch 1, the second
batch 2. Tiny config, random weights, nothing downloaded."""

import torch
from torch import nn
from transformers import Qwen2Config, Qwen2ForCausalLM

VOCAB = 128

# The verdicts compatcheck must give on CPU with tests/real-requirements.txt (torch 2.14.1, transformers 5.24);
# tests/test_real_models.py asserts them, and the findings below, from one run with TEST_OPTIONS.
# A batch of one as the sample is a trap torch.export used to fall into (sizes 0 and 1 specialize);
# with these versions this model exports and runs on batch 2 as well, and the verdicts say so.
EXPECTED = {
    "eager": "pass",
    "onnx_export": "pass",
    "onnxruntime": "pass",
}
EXPECTED_FINDINGS = []
EXPECTED_ROUTES = {"ONNX → onnxruntime → Triton": "works"}
TEST_OPTIONS = []


class Chat(nn.Module):
    def __init__(self):
        super().__init__()
        config = Qwen2Config(vocab_size=VOCAB, hidden_size=32, intermediate_size=64, num_hidden_layers=2,
                             num_attention_heads=4, num_key_value_heads=2, max_position_embeddings=64,
                             use_cache=False)
        self.lm = Qwen2ForCausalLM(config)

    def forward(self, input_ids, attention_mask):
        return self.lm(input_ids=input_ids, attention_mask=attention_mask).logits


def get_model():
    return Chat().eval()


def _batch(batch, length=8):
    return {"input_ids": torch.randint(1, VOCAB, (batch, length)),
            "attention_mask": torch.ones(batch, length, dtype=torch.long)}


def get_inputs():
    return [_batch(1), _batch(2)]
