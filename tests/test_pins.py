"""A "dim pinned" claim is checked by running the artifact at another size of that dim before it is made."""

import pytest

from tests.conftest import run_json
from tests.test_findings import line_of

GRAPH_POOL = '''
import torch
from torch import nn


class GraphPool(nn.Module):
    def __init__(self):
        super().__init__()
        self.lin = nn.Linear(4, 4)

    def forward(self, x, edge_index, batch):  # batch: the graph of each node
        h = torch.zeros_like(x).index_add(0, edge_index[1], self.lin(x)[edge_index[0]])
        num_graphs = int(batch.max()) + 1
        return torch.zeros(num_graphs, 4).index_add(0, batch, h)


def get_model():
    return GraphPool().eval()


def graph(nodes, edges, graphs):
    return torch.randn(nodes, 4), torch.randint(0, nodes, (2, edges)), torch.arange(nodes) * graphs // nodes


def get_inputs():
    return [graph(10, 20, 2), graph(10, 30, 3)]
'''


@pytest.mark.slow
def test_a_trace_that_serves_other_edge_counts_is_blamed_on_the_graph_count_not_a_pinned_dim(tmp_path, write_model):
    path = write_model(GRAPH_POOL)
    proc, report = run_json(tmp_path, "run", str(path), "--stages", "jit_trace")
    trace = report["stages"][1]
    assert trace["status"] == "fail", proc.stdout
    assert not any("pinned it" in f["message"] for f in trace["findings"]), proc.stdout
    first = trace["findings"][0]
    assert (first["kind"], first["op"], first["line"]) == ("frozen-constant", "int()",
                                                           line_of(path, "num_graphs = int(batch.max()) + 1"))
    assert first["message"].startswith("edge_index.shape[1] is not pinned: the trace runs at edge_index.shape[1] = 30")
    assert "on input set 2 is a value: there eager's output has size 3 in dim 0, and 2 at the same input sizes" \
        in first["message"]
    assert first["checked_by"].startswith("the artifact, run on input set 1 at edge_index.shape[1] = 30")
