"""A Python `if` on a dynamic size: export and trace keep the branch of the sample's size. The rewrite is
made for a size (torch.cond on that condition, or the dim kept static), not for a value."""

import torch

EXPECTED = {"eager": "pass", "export": "fail", "jit_trace": "mismatch"}
EXPECTED_FINDINGS = [{"stage": "export", "kind": "dynamic-shape", "line": "if x.shape[0] == 3:", "rewrite": True},
                     {"stage": "jit_trace", "kind": "dynamic-shape", "line": "if x.shape[0] == 3:", "rewrite": True}]


class Branch(torch.nn.Module):
    def forward(self, x):
        if x.shape[0] == 3:
            return x * 2
        return x - 1


def get_model():
    return Branch()


def get_inputs():
    return [torch.randn(3, 4), torch.randn(5, 4)]
