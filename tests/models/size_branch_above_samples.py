"""A branch on the batch size that flips only above the samples' sizes (2 and 5): the trace and the ONNX
graph keep the sample's branch, which the sweep's batch 7 shows."""

import torch

EXPECTED = {"eager": "pass", "jit_trace": "mismatch", "onnx_export": "fail", "onnxruntime": "mismatch"}
EXPECTED_FINDINGS = [{"stage": "jit_trace", "kind": "dynamic-shape", "line": "if x.shape[0] > 6:", "rewrite": True},
                     {"stage": "onnxruntime", "kind": "dynamic-shape", "line": "if x.shape[0] > 6:", "rewrite": True}]
EXPECTED_SWEPT = ["batch 1", "batch 7"]


class Wide(torch.nn.Module):
    def forward(self, x):
        if x.shape[0] > 6:
            return x * 2
        return x - 1


def get_model():
    return Wide()


def get_inputs():
    return [torch.randn(2, 4), torch.randn(5, 4)]
