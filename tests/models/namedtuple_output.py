"""A namedtuple output: torch.export exports it, but torch.export.save cannot write the program until
the namedtuple is registered."""

from collections import namedtuple

import torch

Pair = namedtuple("Pair", "low high")

EXPECTED = {"eager": "pass", "export": "fail", "jit_trace": "pass", "onnx_export": "pass", "onnxruntime": "pass"}
EXPECTED_FINDINGS = [{"stage": "export", "kind": "unexportable-output", "line": "return Pair(x.clamp(max=0), x.clamp(min=0))",
                      "rewrite": True}]


class Split(torch.nn.Module):
    def forward(self, x):
        return Pair(x.clamp(max=0), x.clamp(min=0))


def get_model():
    return Split()


def get_inputs():
    return [torch.randn(2, 3), torch.randn(4, 3)]
