"""A forward that reads the clock: traced and exported artifacts keep the time they were built at.
torch.jit.trace's own check (check_trace=True, its default) traces twice and sees the graphs differ."""

import time

import torch

EXPECTED = {"eager": "pass", "export": "mismatch", "jit_script": "fail", "jit_trace": "fail",
            "onnx_export": "mismatch", "onnxruntime": "mismatch"}
EXPECTED_FINDINGS = [{"stage": "eager", "kind": "nondeterministic", "line": "return x + time.time() % 1000"},
                     {"stage": "jit_trace", "kind": "trace-error", "line": "return x + time.time() % 1000"},
                     {"stage": "onnxruntime", "kind": "variation-lost", "line": "return x + time.time() % 1000"}]


class Stamp(torch.nn.Module):
    def forward(self, x):
        return x + time.time() % 1000


def get_model():
    return Stamp()


def get_inputs():
    return [torch.randn(2, 3), torch.randn(4, 3)]
