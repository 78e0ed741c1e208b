"""Llama (transformers) with left padding: prompts of different lengths padded on the left, as
batched generation does. Tiny config, random weights, nothing downloaded."""

import torch
from torch import nn
from transformers import LlamaConfig, LlamaForCausalLM

VOCAB = 128

# The verdicts compatcheck must give on CPU with tests/real-requirements.txt (torch 2.14.1, transformers
# 5.24); tests/test_real_models.py asserts them, and the findings below, from one run with TEST_OPTIONS.
EXPECTED = {
    "eager": "pass",
    "jit_script": "fail",
    "jit_trace": "pass",
    "onnx_export": "pass",
    "onnxruntime": "mismatch",
}
# stage, kind, the text on the user's line it points at, the library file where it happened, and
# what the message or advice must say.
EXPECTED_FINDINGS = [
    {"stage": "jit_script", "kind": "library-not-scriptable", "line": "return self.lm(",
     "library_file": "transformers/models/llama/modeling_llama.py",
     "says": ["compiles everything reachable from forward", "The routes that work here: TorchScript (trace)."]},
    {"stage": "jit_trace", "kind": "frozen-control-flow", "line": "return self.lm(",
     "library_file": "transformers/integrations/sdpa_attention.py", "says": ["not in yours"]},
    {"stage": "onnxruntime", "kind": "export-divergence", "line": "return self.lm(",
     "library_file": "transformers/models/llama/modeling_llama.py",
     "says": ["at dim 0 index 1 of 2; dim 1 indices 0-2 of 8", "every differing value lies where input attention_mask is 0"]},
]
EXPECTED_ROUTES = {"TorchScript (script)": "blocked", "TorchScript (trace)": "works-with-warnings",
                   "ONNX → onnxruntime → Triton": "blocked"}
TEST_OPTIONS = []


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
