"""A Beta-distribution head: log B(a, b) with torch.lgamma and E[log p] with torch.digamma."""

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
    "onnxruntime": "skip",
}

# The findings tests/test_findings.py asserts: stage, kind, op and the line they point at.
EXPECTED_FINDINGS = [
    {"stage": "onnx_export", "kind": "unsupported-op", "op": "aten.lgamma", "line": 33},
    {"stage": "onnx_export", "kind": "unsupported-op", "op": "aten.digamma", "line": 34},
]


class BetaHead(nn.Module):
    def __init__(self):
        super().__init__()
        self.linear = nn.Linear(6, 2)

    def forward(self, x):
        a, b = (nn.functional.softplus(self.linear(x)) + 0.1).unbind(-1)
        log_beta = torch.lgamma(a) + torch.lgamma(b) - torch.lgamma(a + b)
        expected_log_p = torch.digamma(a) - torch.digamma(a + b)
        return log_beta, expected_log_p


def get_model():
    return BetaHead().eval()


def get_inputs():
    return [torch.randn(2, 6), torch.randn(5, 6)]
