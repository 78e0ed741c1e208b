"""Graph pooling: the max of node features per graph, with Tensor.index_reduce."""

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
    {"stage": "onnx_export", "kind": "unsupported-op", "op": "aten.index_reduce", "line": 33},
]


class GraphMaxPool(nn.Module):
    def __init__(self, graphs=3):
        super().__init__()
        self.graphs = graphs
        self.node = nn.Linear(5, 5)

    def forward(self, x, graph):
        h = torch.relu(self.node(x))
        return torch.zeros(self.graphs, h.shape[1]).index_reduce(0, graph, h, "amax")


def get_model():
    return GraphMaxPool().eval()


def _inputs(nodes):
    return torch.randn(nodes, 5), torch.arange(nodes) % 3


def get_inputs():
    return [_inputs(6), _inputs(10)]
