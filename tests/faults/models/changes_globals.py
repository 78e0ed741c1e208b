"""While traced, switches the default dtype to float64 and changes directory; later stages must not inherit it."""

import os
import tempfile

import torch


class ChangesGlobals(torch.nn.Module):
    def forward(self, x):
        if torch.jit.is_tracing():
            torch.set_default_dtype(torch.float64)
            os.chdir(tempfile.gettempdir())
        # Under an inherited float64 default this tensor, and so the output, would be float64.
        return x + torch.ones(x.shape[-1])


def get_model():
    return ChangesGlobals()


def get_inputs():
    return [torch.ones(2, 3), torch.ones(4, 3)]
