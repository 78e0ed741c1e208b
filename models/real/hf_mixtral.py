"""Mixtral (transformers), a sparse mixture of experts, logits only. Tiny config, random weights, nothing
downloaded."""

import torch
from torch import nn
from transformers import MixtralConfig, MixtralForCausalLM

VOCAB = 128

# The verdicts compatcheck must give on CPU with tests/real-requirements.txt (torch 2.14.1, transformers
# 5.24); tests/test_real_models.py asserts them, and the findings below, from one run with TEST_OPTIONS.
# The experts run through transformers' grouped_mm custom op, which the ONNX exporter cannot translate;
# with the model's experts implementation switched to batched matmuls it exports and matches eager in
# onnxruntime, which compatcheck checks before it says so.
EXPECTED = {
    "eager": "pass",
    "onnx_export": "fail",
    "onnxruntime": "skip",
}
EXPECTED_FINDINGS = [
    {"stage": "onnx_export", "kind": "unsupported-op", "line": "return self.lm(",
     "library_file": "transformers/integrations/moe.py"},
    {"stage": "onnx_export", "kind": "passes-with", "says": ["set_experts_implementation('batched_mm')"]},
]
EXPECTED_ROUTES = {"ONNX → onnxruntime → Triton": "blocked"}
TEST_OPTIONS = []


class Mixtral(nn.Module):
    def __init__(self):
        super().__init__()
        config = MixtralConfig(vocab_size=VOCAB, hidden_size=32, intermediate_size=64, num_hidden_layers=2,
                               num_attention_heads=4, num_key_value_heads=2, num_local_experts=4,
                               num_experts_per_tok=2, max_position_embeddings=64, use_cache=False)
        self.lm = MixtralForCausalLM(config)

    def forward(self, input_ids, attention_mask):
        return self.lm(input_ids=input_ids, attention_mask=attention_mask).logits


def get_model():
    return Mixtral().eval()


def get_inputs():
    return [{"input_ids": torch.randint(0, VOCAB, (2, 8)), "attention_mask": torch.ones(2, 8, dtype=torch.long)},
            {"input_ids": torch.randint(0, VOCAB, (3, 6)), "attention_mask": torch.ones(3, 6, dtype=torch.long)}]
