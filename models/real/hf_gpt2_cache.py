"""GPT-2 (transformers) returned as it is, with its key/value cache: forward returns the model's output
object, logits and a DynamicCache. Tiny config, random weights, nothing downloaded."""

import torch
from transformers import GPT2Config, GPT2LMHeadModel

VOCAB = 128

# The verdicts compatcheck must give on CPU with tests/real-requirements.txt (torch 2.14.1, transformers
# 5.24); tests/test_real_models.py asserts them, and the findings below, from one run with TEST_OPTIONS.
# The output is compared by the tensors it holds, the cache's keys and values too: eager agrees with
# itself. torch.export, and so the ONNX exporter, cannot carry a DynamicCache out of the program, and
# jit.trace cannot return the output object: what the plain calls give. A wrapper that returns the
# tensors flat, the cache's among them, traces and matches (rebuilt from one eager call's outputs).
EXPECTED = {
    "eager": "pass",
    "export": "fail",
    "jit_trace": "fail",
    "onnx_export": "fail",
}
EXPECTED_FINDINGS = [
    {"stage": "export", "kind": "unexportable-output", "says": ["DynamicCache", "register_pytree_node"]},
    {"stage": "onnx_export", "kind": "unexportable-output", "says": ["DynamicCache"]},
    {"stage": "jit_trace", "kind": "passes-with", "says": ["FlatOutputs", "tensors_of", "rebuilt("]},
]
EXPECTED_ROUTES = {"TorchScript (trace)": "blocked", "ONNX → onnxruntime → Triton": "blocked"}
TEST_OPTIONS = []


def get_model():
    config = GPT2Config(vocab_size=VOCAB, n_positions=64, n_embd=32, n_layer=2, n_head=4, use_cache=True,
                        bos_token_id=VOCAB - 1, eos_token_id=VOCAB - 1)
    return GPT2LMHeadModel(config).eval()


def get_inputs():
    return [{"input_ids": torch.randint(0, VOCAB, (2, 8))}, {"input_ids": torch.randint(0, VOCAB, (3, 6))}]
