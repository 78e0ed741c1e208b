"""T5 (transformers), an encoder-decoder: input sets that differ in batch and in both sequence
lengths. Tiny config, random weights, nothing downloaded."""

import torch
from torch import nn
from transformers import T5Config, T5ForConditionalGeneration

VOCAB = 64

# The verdicts compatcheck must give on CPU with tests/real-requirements.txt (torch 2.14.1, transformers 5.24);
# tests/test_real_models.py asserts them, and the findings below, from one run with TEST_OPTIONS.
# Exported as a deployer does, under torch.no_grad(), the attention reshape with a dynamic batch and
# both lengths exports, and the ONNX file matches eager (with grad mode on, the exporter refused it:
# "Cannot view a tensor with shape ... strides ...").
EXPECTED = {
    "eager": "pass",
    "jit_script": "fail",
    "onnx_export": "pass",
    "onnxruntime": "pass",
}
EXPECTED_FINDINGS = [
    {"stage": "jit_script", "kind": "library-not-scriptable", "line": "return self.t5(",
     "library_file": "transformers/models/t5/modeling_t5.py"},
]
EXPECTED_ROUTES = {"TorchScript (script)": "blocked", "ONNX → onnxruntime → Triton": "works"}
TEST_OPTIONS = []


class Translator(nn.Module):
    def __init__(self):
        super().__init__()
        config = T5Config(vocab_size=VOCAB, d_model=32, d_kv=8, d_ff=64, num_layers=2, num_decoder_layers=2,
                          num_heads=4, decoder_start_token_id=0, pad_token_id=0, use_cache=False)
        self.t5 = T5ForConditionalGeneration(config)

    def forward(self, input_ids, attention_mask, decoder_input_ids):
        return self.t5(input_ids=input_ids, attention_mask=attention_mask, decoder_input_ids=decoder_input_ids).logits


def get_model():
    return Translator().eval()


def _pair(batch, source, target):
    return {"input_ids": torch.randint(1, VOCAB, (batch, source)),
            "attention_mask": torch.ones(batch, source, dtype=torch.long),
            "decoder_input_ids": torch.randint(1, VOCAB, (batch, target))}


def get_inputs():
    return [_pair(2, 7, 5), _pair(3, 9, 4)]
