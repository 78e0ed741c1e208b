"""`torch.rand` in forward: random by design, whatever the seed hides."""

import torch

EXPECTED = {"eager": "pass", "export": "pass", "jit_script": "pass", "jit_trace": "pass", "onnx_export": "pass",
            "onnxruntime": "pass"}
EXPECTED_FINDINGS = [{"stage": "eager", "kind": "nondeterministic", "line": "return x + torch.rand(x.shape) * 0.1"}]


class Jitter(torch.nn.Module):
    def forward(self, x):
        return x + torch.rand(x.shape) * 0.1


def get_model():
    return Jitter()


def get_inputs():
    return [torch.randn(2, 3), torch.randn(4, 3)]
