"""Trim padding to the longest sequence in the batch: a size read with .item() and int() is a
value torch.export cannot know while tracing."""

import torch
from torch import nn

# The verdicts compatcheck must give on CPU (torch 2.13); tests/test_models.py asserts them.
EXPECTED = {
    "eager": "pass",
    "compile": "pass",
    "compile_fullgraph": "fail",
    "export": "fail",
    "aot_inductor": "skip",
    "jit_script": "pass",
    "jit_trace": "mismatch",
    "onnx_export": "fail",
    "onnxruntime": "skip",
}

# The findings tests/test_findings.py asserts: stage, kind, op and the line they point at.
EXPECTED_FINDINGS = [
    {"stage": "export", "kind": "data-dependent-guard", "op": "int()", "line": 29},
    {"stage": "onnx_export", "kind": "data-dependent-guard", "op": "int()", "line": 29},
]


class TrimPadding(nn.Module):
    def forward(self, x, lengths):  # x: (batch, length, features), lengths: (batch,)
        longest = int(lengths.max().item())
        return x[:, :longest].sum(1)


def get_model():
    return TrimPadding().eval()


def get_inputs():
    return [(torch.randn(2, 6, 3), torch.tensor([3, 5])), (torch.randn(4, 6, 3), torch.tensor([1, 2, 2, 4]))]
