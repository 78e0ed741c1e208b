"""A matrix product of int8 tensors: ONNX MatMul has no int8, but the exporter emits it anyway."""

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
    "onnx_export": "fail",
    "onnxruntime": "fail",
}

# The findings tests/test_findings.py asserts: stage, kind, op and the line they point at.
EXPECTED_FINDINGS = [
    {"stage": "onnx_export", "kind": "invalid-graph", "op": "MatMul", "line": 28},
    {"stage": "onnxruntime", "kind": "invalid-graph", "op": "MatMul", "line": 28},
]


class CoOccurrence(nn.Module):
    def forward(self, counts):
        return counts @ counts.T


def get_model():
    return CoOccurrence().eval()


def get_inputs():
    return [torch.randint(0, 4, (3, 6), dtype=torch.int8), torch.randint(0, 4, (5, 6), dtype=torch.int8)]
