"""nn.MultiheadAttention with a boolean attn_mask and a key padding mask."""

import torch
from torch import nn

# The verdicts compatcheck must give on CPU (torch 2.13); tests/test_models.py asserts them.
EXPECTED = {
    "eager": "pass",
    "compile": "pass",
    "compile_fullgraph": "pass",
    "export": "pass",
    "aot_inductor": "pass",
    "jit_script": "pass",
    "jit_trace": "pass",
    "onnx_export": "pass",
    "onnxruntime": "pass",
}


class Attention(nn.Module):
    def __init__(self):
        super().__init__()
        self.mha = nn.MultiheadAttention(16, 4, batch_first=True)

    def forward(self, x, padding):
        causal = torch.triu(torch.ones(x.shape[1], x.shape[1], dtype=torch.bool), diagonal=1)
        out, _ = self.mha(x, x, x, attn_mask=causal, key_padding_mask=padding, need_weights=False)
        return out


def get_model():
    return Attention().eval()


def _inputs(batch, length):
    padding = torch.zeros(batch, length, dtype=torch.bool)
    padding[0, -1] = True
    return torch.randn(batch, length, 16), padding


def get_inputs():
    return [_inputs(2, 6), _inputs(3, 6)]
