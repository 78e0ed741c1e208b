"""A forward that blocks in C on the meta device (where eager's device check runs it): it locks a
mutex it already holds, where no signal reaches Python code. Everywhere else it answers at once."""

import ctypes

import torch

_LIBC = ctypes.CDLL(None)
_MUTEX = ctypes.create_string_buffer(64)  # a zeroed pthread_mutex_t is an unlocked default mutex


class BlocksOnMeta(torch.nn.Module):
    def forward(self, x):
        if x.device.type == "meta":
            _LIBC.pthread_mutex_lock(_MUTEX)
            _LIBC.pthread_mutex_lock(_MUTEX)
        return torch.relu(x) + 1


def get_model():
    return BlocksOnMeta()


def get_inputs():
    return [torch.randn(2, 3)]
