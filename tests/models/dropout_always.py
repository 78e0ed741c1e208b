"""`dropout(..., training=True)`: on in eval mode too, random in every artifact that keeps it."""

import torch
import torch.nn.functional as F

EXPECTED = {"eager": "pass", "export": "pass", "jit_script": "pass", "jit_trace": "pass", "onnx_export": "pass",
            "onnxruntime": "pass"}
EXPECTED_FINDINGS = [{"stage": "eager", "kind": "nondeterministic", "line": "return F.dropout(self.fc(x), 0.5, training=True)",
                      "rewrite": True}]


class MonteCarlo(torch.nn.Module):
    def __init__(self):
        super().__init__()
        self.fc = torch.nn.Linear(6, 6)

    def forward(self, x):
        return F.dropout(self.fc(x), 0.5, training=True)


def get_model():
    return MonteCarlo()


def get_inputs():
    return [torch.randn(2, 6), torch.randn(4, 6)]
