"""Compiles at once for input set 1 and hangs while torch.compile compiles again for input set 2's new
shape, as a recompile that takes longer than --timeout does."""

import time

import torch


class HangsWhenCompiledAgain(torch.nn.Module):
    def forward(self, x):
        if torch.compiler.is_compiling() and x.shape[0] == 4:
            time.sleep(3600)
        return x + 1


def get_model():
    return HangsWhenCompiledAgain()


def get_inputs():
    return [torch.ones(2, 3), torch.ones(4, 3)]
