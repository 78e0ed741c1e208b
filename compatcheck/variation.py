"""Outputs that change by design: a forward that draws random numbers or reads the clock.

Every run is seeded the same, so a forward with `torch.rand` or `dropout(training=True)` agrees with
itself and would be compared value by value, with the noise of an fp64 run (which draws other numbers)
as the tolerance: anything of that size passes. So randomness is found by running eager with another
seed, and the clock by running it with the clock moved; the op that draws (its output differs between
the two seeds) and the clock read are named at the user's line. For such a model no artifact's values
are compared with eager's: each artifact is run again under the other seed (or clock), and it must vary
too, else the randomness or the reading of the clock was lost when it was built.
"""

from __future__ import annotations

import hashlib
import sys
import time
import traceback
from contextlib import contextmanager
from dataclasses import dataclass, field
from typing import Callable

import torch
from torch.utils import _pytree as pytree
from torch.utils._python_dispatch import TorchDispatchMode

SEEDS = (0, 1)  # the seed of every run, and the other one that shows randomness
# Moved by a year and a fraction of a second: `time.time() % N` and the date change both.
CLOCK_SHIFT_S = 365.25 * 86400 + 0.375
_CLOCKS = ("time", "time_ns", "monotonic", "monotonic_ns", "perf_counter", "perf_counter_ns")


def reseed(seed: int) -> None:
    """torch.manual_seed(seed). Where no accelerator is available (a CPU build, or no device), only the CPU
    generator can draw, and it is the only one seeded: torch.manual_seed queues the seed of each accelerator
    that has not started with a record of the caller's stack, about a millisecond a call, and every stage
    reseeds before each call of its artifact."""
    if torch.accelerator.is_available():
        torch.manual_seed(seed)
    else:
        torch.default_generator.manual_seed(seed)


@dataclass
class Site:
    what: str  # "aten.bernoulli", "time.time"
    frame: traceback.FrameSummary | None  # the user's line, when the call came from their code


@dataclass
class Variation:
    """What makes the model's outputs change: random ops, clock reads; empty when they do not."""

    random: list[Site] = field(default_factory=list)
    clock: list[Site] = field(default_factory=list)
    # Per input set, the indices of the output leaves that change with the seed / with the clock.
    random_leaves: list[set[int]] = field(default_factory=list)
    clock_leaves: list[set[int]] = field(default_factory=list)

    def __bool__(self) -> bool:
        return bool(self.random or self.clock)

    def first(self) -> Site:
        return (self.random or self.clock)[0]

    def kind(self) -> str:
        return "random" if self.random else "clock"


class _SeededCalls(TorchDispatchMode):
    """Records each call of an op tagged nondeterministic_seeded, with the user's line and a digest of what
    it returned. The tag says an op may draw, not that it did: scaled-dot-product attention carries it
    and draws only with dropout_p > 0."""

    def __init__(self, user):
        super().__init__()
        self.user = user
        self.calls: list[tuple[Site, bytes | None]] = []

    def __torch_dispatch__(self, func, types, args=(), kwargs=None):
        out = func(*args, **(kwargs or {}))
        if torch.Tag.nondeterministic_seeded in getattr(func, "tags", ()):
            frame = self.user.innermost(traceback.extract_stack()[:-1])
            self.calls.append((Site(f"aten.{func.overloadpacket.__name__}", frame), _digest(out)))
        return out


def _digest(out) -> bytes | None:
    """The bytes of every tensor an op returned, hashed (read at once: an in-place draw is overwritten
    later); None where they cannot be read, so the call is never named on a guess."""
    digest = hashlib.blake2b(digest_size=16)
    try:
        for leaf in pytree.tree_leaves(out):
            if isinstance(leaf, torch.Tensor):
                digest.update(leaf.detach().cpu().contiguous().reshape(-1).view(torch.uint8).numpy())
            else:
                digest.update(repr(leaf).encode())
    except (RuntimeError, TypeError, ValueError):
        return None
    return digest.digest()


def drawing_ops(run: Callable[[int], object], user) -> list[Site]:
    """The ops that draw the random numbers, first called first: of the seeded ops, those whose output
    differs between `run` under each of SEEDS (run(seed) calls eager under that seed)."""
    runs = []
    for seed in SEEDS:
        with _SeededCalls(user) as recorder:
            run(seed)
        runs.append(recorder.calls)
    found: list[Site] = []
    for (site, digest), (other, drawn) in zip(*runs):
        if site.what != other.what:
            break  # the runs took different paths from here: the calls no longer pair up
        if digest is not None and drawn is not None and digest != drawn and all(
                one.what != site.what for one in found):
            found.append(site)
    return found


@contextmanager
def clock_moved(user=None, found: list[Site] | None = None, shift: float = CLOCK_SHIFT_S):
    """time.time() and its kin (in `time`, and where a user module imported them by name) run `shift`
    seconds ahead; calls from user code are recorded into `found`."""
    originals = {name: getattr(time, name) for name in _CLOCKS}
    moved = {}
    for name, original in originals.items():
        step = int(shift * 1e9) if name.endswith("_ns") else shift

        def ahead(original=original, step=step, name=name):
            if found is not None and user is not None:
                frame = user.innermost(traceback.extract_stack()[:-1])
                if frame is not None and all(site.what != f"time.{name}" for site in found):
                    found.append(Site(f"time.{name}", frame))
            return original() + step

        moved[name] = ahead
    imported = [(module, attribute, value) for module in _user_modules(user) for attribute, value in vars(module).items()
                if any(value is original for original in originals.values())]
    try:
        for name, function in moved.items():
            setattr(time, name, function)
        for module, attribute, value in imported:
            setattr(module, attribute, moved[next(n for n, o in originals.items() if o is value)])
        yield found
    finally:
        for name, original in originals.items():
            setattr(time, name, original)
        for module, attribute, value in imported:
            setattr(module, attribute, value)


def _user_modules(user) -> list:
    if user is None:
        return []
    return [module for module in list(sys.modules.values())
            if user.owns(getattr(module, "__file__", None))]
