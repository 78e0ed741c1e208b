"""How many workers a run uses: one per CORES_PER_WORKER cores unless --jobs says otherwise, and never
more than the machine's free memory holds.

On 2 cores two workers took 0.97-1.33x the wall time of one for 1.14-1.18x its CPU time: the second
worker imports torch again, and one worker's inductor probe already keeps the second core busy. With
four cores to each, each gets its own share for torch's threads and inductor's compile pool
(worker/inductor.py). How much memory a
worker needs is known once the first has loaded the model: its peak resident size then, HEADROOM
times over (compiling and exporting grow a worker past it); the other workers start only then, as
many as the memory available at that moment holds, and the lanes left over run after the first.
"""

from __future__ import annotations

import os

from compatcheck import host

CORES_PER_WORKER = 4
HEADROOM = 2


def wanted(jobs: int | None) -> int:
    """--jobs, or its default from the machine's cores."""
    return jobs if jobs is not None else max(1, host.cores() // CORES_PER_WORKER)


def available_memory() -> int | None:
    """Bytes of memory the machine can give without swapping (Linux's MemAvailable), None where unknown."""
    try:
        with open("/proc/meminfo") as meminfo:
            for line in meminfo:
                if line.startswith("MemAvailable:"):
                    return int(line.split()[1]) * 1024
    except (OSError, ValueError, IndexError):
        pass
    try:
        return os.sysconf("SC_AVPHYS_PAGES") * os.sysconf("SC_PAGE_SIZE")
    except (ValueError, OSError, AttributeError):
        return None


def memory_allows(lanes: int, footprint: int | None, available: int | None) -> int:
    """How many of `lanes` workers may run at once, the first (of `footprint` bytes at its peak after
    loading the model) running already: as many more as `available` bytes hold at HEADROOM times
    its footprint each. Where either is unknown, every lane."""
    if not footprint or available is None:
        return lanes
    return max(1, min(lanes, 1 + available // (footprint * HEADROOM)))
