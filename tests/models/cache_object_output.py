"""An output object pytree does not know, holding tensors (as a library's key/value cache does): compared
by the tensors it holds. torch.export refuses such an output, as the plain call does."""

import torch


class Cache:
    def __init__(self, keys, values):
        self.keys, self.values = keys, values
        self.device = keys.device


EXPECTED = {"eager": "pass", "jit_script": "pass", "export": "fail", "jit_trace": "fail", "onnx_export": "fail"}
EXPECTED_FINDINGS = [{"stage": "export", "kind": "unexportable-output", "line": "return keys.softmax(-1), Cache(keys, values)"}]


class Attend(torch.nn.Module):
    def __init__(self):
        super().__init__()
        self.proj = torch.nn.Linear(4, 8)

    def forward(self, x):
        keys, values = self.proj(x).chunk(2, dim=-1)
        return keys.softmax(-1), Cache(keys, values)


def get_model():
    return Attend()


def get_inputs():
    return [torch.randn(2, 3, 4), torch.randn(3, 5, 4)]
