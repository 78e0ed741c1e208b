"""Input set 1, the sample, has batch 0: torch.export specializes sizes 0 and 1, so export fails; built
from input set 2 it passes, and the finding says so (checked)."""

import torch

EXPECTED = {"eager": "pass", "export": "fail", "jit_trace": "pass", "onnx_export": "pass", "onnxruntime": "pass"}
EXPECTED_FINDINGS = [{"stage": "export", "kind": "dynamic-shape", "line": "return [torch.randn(0, 3), torch.randn(4, 3)]",
                      "rewrite": True}]


class Scale(torch.nn.Module):
    def forward(self, x):
        return x * x.shape[0]


def get_model():
    return Scale()


def get_inputs():
    return [torch.randn(0, 3), torch.randn(4, 3)]
