"""A count that mixes a data-dependent size with a dynamic one, as torch_geometric's add_self_loops and
scatter do (edges kept by a mask, then a self loop per node): torch.export proves `kept + nodes > 0`
from a dynamic size being at least 2, while torch.onnx.export captures with sizes 0 and 1 allowed
(backed_size_oblivious) and cannot decide it. The usual torch.onnx.export call fails; the program of
torch.export.export, handed to torch.onnx.export, exports and runs right in onnxruntime."""

import torch


class KeepThenLoop(torch.nn.Module):
    def forward(self, x):
        kept = x[x[:, 0] > 0]  # the rows a mask keeps: as many as the values say
        rows = torch.cat([kept, x])  # and each row once more
        if rows.shape[0] > 0:
            return x * 2
        return x


def get_model():
    return KeepThenLoop()


def get_inputs():
    return [torch.tensor([[1.0, 2.0, 3.0], [-1.0, 5.0, 6.0]]),
            torch.tensor([[2.0, 1.0, 0.5], [3.0, -2.0, 1.0], [-4.0, 0.0, 2.0]])]
