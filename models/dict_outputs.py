"""A model returning a dict: jit.trace refuses it unless strict=False."""

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
    "jit_trace": "fail",
    "onnx_export": "pass",
    "onnxruntime": "pass",
}


class TwoHeads(nn.Module):
    def __init__(self):
        super().__init__()
        self.body = nn.Linear(8, 8)
        self.cls = nn.Linear(8, 3)
        self.box = nn.Linear(8, 4)

    def forward(self, x):
        h = torch.relu(self.body(x))
        return {"logits": self.cls(h), "boxes": self.box(h).sigmoid()}


def get_model():
    return TwoHeads().eval()


def get_inputs():
    return [torch.randn(2, 8), torch.randn(4, 8)]
