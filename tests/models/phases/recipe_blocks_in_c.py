"""The ONNX export with dynamo=True fails (the forward refuses to be exported); the first recipe that
gets past it, the TorchScript-based exporter, traces a forward that then blocks in C: it locks a mutex
it already holds, where no signal reaches Python code."""

import ctypes

import torch

_LIBC = ctypes.CDLL(None)
_MUTEX = ctypes.create_string_buffer(64)  # a zeroed pthread_mutex_t is an unlocked default mutex


class RefusesExport(torch.nn.Module):
    def forward(self, x):
        if torch.compiler.is_exporting():
            raise RuntimeError("this forward refuses to be exported")
        if torch.jit.is_tracing():
            _LIBC.pthread_mutex_lock(_MUTEX)
            _LIBC.pthread_mutex_lock(_MUTEX)
        return x * 2


def get_model():
    return RefusesExport()


def get_inputs():
    return [torch.randn(2, 3)]
