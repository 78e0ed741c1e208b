"""Inductor's one-time setup, made by one worker at a time, and its share of the cores.

On a cache it has not seen, inductor's first compile probes which vector instruction sets the CPU
has by compiling and running a test program for each (about 8 s on 2 cores), then keeps the answer
in its on-disk cache. Workers started side by side (--jobs) would each make the same probe at the
same time; under a lock in the run's folder, the first makes it and the others read its answer.
The probe is what any compile makes first, so nothing a stage does changes.

Inductor compiles its C++ in a pool of as many processes as the machine has cores; with workers side
by side each gets its share instead, so they do not start a pool each for the same cores.
"""

from __future__ import annotations

import fcntl
from pathlib import Path

LOCK = "inductor-setup.lock"


def inductor_ready(folder: Path, device: str) -> None:
    """Make inductor's CPU probe (or read it from its cache) while holding the run's lock."""
    if device != "cpu":
        return  # a GPU compile picks its kernels otherwise; the CPU probe would only cost time
    with open(folder / LOCK, "a") as lock:
        fcntl.flock(lock, fcntl.LOCK_EX)
        try:
            from torch._inductor.cpu_vec_isa import valid_vec_isa_list

            valid_vec_isa_list()
        except Exception:  # a torch that probes elsewhere, or not at all: the compile probes as it would
            return


def share_cores(cores: int | None) -> None:
    """With workers side by side: inductor's compile threads set to this worker's share of the cores."""
    if not cores:
        return
    try:
        import torch._inductor.config as config

        config.compile_threads = cores
    except Exception:  # a torch without it: inductor picks as it would
        return
