"""A branch on a tensor's value: tracing freezes the branch taken for input set 1."""

import torch
from torch import nn

# The verdicts compatcheck must give on CPU (torch 2.13); tests/test_models.py asserts them.
EXPECTED = {
    "eager": "pass",
    "compile": "pass",
    "compile_fullgraph": "fail",
    "export": "fail",
    "aot_inductor": "skip",
    "jit_script": "pass",
    "jit_trace": "mismatch",
    "onnx_export": "fail",
    "onnxruntime": "skip",
    # Every stage: the docs show `compatcheck run models/data_dependent_if.py`, and the suite's run of
    # this model is that command (tests/test_docs.py renders the docs' blocks from it).
    "triton": "skip",
    "openvino": "mismatch",
}


class Gate(nn.Module):
    def __init__(self):
        super().__init__()
        self.linear = nn.Linear(4, 4)

    def forward(self, x):
        y = self.linear(x)
        if x.sum() > 0:
            return y * 2
        return -y


def get_model():
    return Gate().eval()


def get_inputs():
    # The branch goes one way for the first set and the other way for the second.
    return [(torch.rand(3, 4) + 0.1,), (-torch.rand(3, 4) - 0.1,)]
