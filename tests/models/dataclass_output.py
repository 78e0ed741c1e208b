"""A dataclass output: compared field by field, by the tensors it holds, never by the dataclass's `==`."""

from dataclasses import dataclass

import torch

EXPECTED = {"eager": "pass", "export": "fail", "jit_trace": "fail", "onnx_export": "fail"}
EXPECTED_FINDINGS = [{"stage": "export", "kind": "unexportable-output", "line": "return Result(scores=x.softmax(-1), labels=x.argmax(-1))",
                      "rewrite": True}]


@dataclass
class Result:
    scores: torch.Tensor
    labels: torch.Tensor


class Classify(torch.nn.Module):
    def forward(self, x):
        return Result(scores=x.softmax(-1), labels=x.argmax(-1))


def get_model():
    return Classify()


def get_inputs():
    return [torch.randn(2, 5), torch.randn(3, 5)]
