"""forward assigns a tensor attribute: torch.export warns that it must be a buffer, and the exported program
keeps none of it between calls. The warning is the finding."""

import torch

EXPECTED = {"eager": "pass", "export": "pass"}
EXPECTED_FINDINGS = [{"stage": "export", "kind": "unregistered-state", "line": "self.last = x.mean(0)", "rewrite": True}]


class Remember(torch.nn.Module):
    def forward(self, x):
        self.last = x.mean(0)
        return x * self.last


def get_model():
    return Remember()


def get_inputs():
    return [torch.randn(2, 3), torch.randn(4, 3)]
