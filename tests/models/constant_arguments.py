"""Non-tensor arguments (a str, an int, a bool): constants of every artifact, the same in every input set,
not inputs of the ONNX graph. jit.trace takes tensors only."""

import torch

from compatcheck import Call

EXPECTED = {"eager": "pass", "export": "pass", "jit_trace": "fail", "onnx_export": "pass", "onnxruntime": "pass"}
EXPECTED_FINDINGS = []


class Pool(torch.nn.Module):
    def forward(self, x, mode="mean", dim=1, keep=False):
        pooled = x.mean(dim, keepdim=keep) if mode == "mean" else x.amax(dim, keepdim=keep)
        return pooled * 2


def get_model():
    return Pool()


def get_inputs():
    return [Call(torch.randn(2, 3, 4), mode="max", dim=2, keep=True),
            Call(torch.randn(5, 3, 4), mode="max", dim=2, keep=True)]
