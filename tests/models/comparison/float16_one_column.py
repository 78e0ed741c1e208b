"""Class 2: under --dtype float16 the trace froze a sign that one small column of 512 (a gate, a few
thousandths) is multiplied by, so on the second input set that column is 100% wrong (the opposite sign) and
the 511 others are exact. Judged by one RMS over the leaf, the column is averaged away; judged element by
element, it is a mismatch. A plain script: m = model.half(); torch.jit.trace(m, x1.half())(x2.half())
against m(x2.half()) differs by twice the column's values there, and is equal everywhere else."""

import torch

EXPECTED = {"eager": "pass", "jit_trace": "mismatch"}
OPTIONS = ["--dtype", "float16"]


class OneColumnSign(torch.nn.Module):
    def __init__(self):
        super().__init__()
        self.proj = torch.nn.Linear(16, 512)

    def forward(self, x):
        y = self.proj(x)
        sign = 1.0 if float(x.sum()) > 0 else -1.0  # a Python number: the trace keeps input set 1's
        return torch.cat([y[:, :7], y[:, 7:8] * (0.003 * sign), y[:, 8:]], dim=1)


def get_model():
    torch.manual_seed(0)
    return OneColumnSign().eval()


def get_inputs():
    x = torch.rand(4, 16) + 0.1
    return [x, -x]
