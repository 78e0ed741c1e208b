"""Inductor's one-time setup, made beside the stages that do not need it, by one worker at a time, and
its share of the cores.

On a cache it has not seen, inductor's first compile probes which vector instruction sets the CPU
has by compiling and running a test program for each, in turn (about 9 s on 2 cores), then keeps the
answer in its on-disk cache. The probe is mostly the C++ compiler's time, in processes of its own: a
worker whose stages will compile starts it in a thread once it has loaded the model (and read the
environment the report gives: inductor sets TORCHINDUCTOR_CACHE_DIR as it starts), so it runs on the
cores the worker leaves idle while the stages before the first compile run (the lanes order them
first: ladder.lanes), each set's test beside the others' where more than one core is idle; that
compile waits for it, its core given to the probe meanwhile. Workers started side by side (--jobs)
would each make the same probe at the same time; under a lock in the run's folder, the first makes it
and the others read its answer. The probe is what any compile makes first, so nothing a stage does
changes.

Inductor compiles its C++ in a pool of as many processes as the machine has cores, and torch runs
its kernels on as many threads; with workers side by side each gets its share of both instead.
"""

from __future__ import annotations

import fcntl
import threading
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path

from compatcheck import host

LOCK = "inductor-setup.lock"

_probe: threading.Thread | None = None
_share: int | None = None  # with workers side by side, this worker's share of the cores


def _cores() -> int:
    """The cores this worker may use."""
    return min(host.cores(), _share or host.cores())


# The cores the probe's compilers may take at once: those the worker's main thread leaves idle, and its
# own core too once it waits for the probe (a release past the start count widens it).
_cores_free = threading.Semaphore(0)


def _side_by_side(cpu_vec_isa) -> None:
    """Probe the x86 instruction sets the CPU claims side by side, as many at once as there are idle cores
    (their compilers run as processes of their own; more at once than cores only makes each slower), one
    more once the worker waits for the probe; valid_vec_isa_list, which asks each in turn, then reads their
    answers. The sets asked are those it would ask: the claimed ones, by the same test."""
    claimed = cpu_vec_isa.x86_isa_checker()
    asked = [isa for isa in cpu_vec_isa.supported_vec_isa_list if all(flag in claimed for flag in str(isa).split())]
    if len(asked) > 1:
        with ThreadPoolExecutor(min(_cores(), len(asked)), thread_name_prefix="inductor-probe") as pool:
            list(pool.map(_probed, asked))


def _probed(isa) -> bool:
    """Inductor's test of one instruction set, once a core is free for its compiler."""
    with _cores_free:
        return bool(isa)


def _probe_under_lock(folder: Path, cpu_vec_isa) -> None:
    """Make inductor's CPU probe (or read it from its cache) while holding the run's lock."""
    with open(folder / LOCK, "a") as lock:
        fcntl.flock(lock, fcntl.LOCK_EX)
        try:
            _side_by_side(cpu_vec_isa)
        except Exception:  # a torch that tells the sets otherwise: the list below asks each in turn
            pass
        try:
            cpu_vec_isa.valid_vec_isa_list()
        except Exception:  # the compile probes again, as it would, and meets what failed here
            return


def start_probe(folder: Path, device: str) -> None:
    """Start the probe in the background, once per worker; only a CPU compile needs it.

    Inductor (and with it torch._dynamo) is imported here, in the calling thread: an import in the
    thread could meet what the meta run puts in sys.modules while it runs (diagnose/device.py)."""
    global _probe, _cores_free
    if device != "cpu" or _probe is not None:
        return
    try:
        import torch._inductor.codecache  # noqa: F401  (what the probe imports as it compiles)
        from torch._inductor import cpu_vec_isa
    except Exception:  # a torch that probes elsewhere, or breaks on import: the compile meets it as it would
        return
    _cores_free = threading.Semaphore(max(1, _cores() - 1))
    _probe = threading.Thread(target=_probe_under_lock, args=(folder, cpu_vec_isa), name="inductor-probe",
                              daemon=True)
    _probe.start()


def inductor_ready(folder: Path, device: str) -> None:
    """Return once the probe is made: the first compile of a worker waits here."""
    start_probe(folder, device)
    if _probe is not None and _probe.is_alive():
        _cores_free.release()  # the main thread's core, until the probe is made
        _probe.join()


def share_cores(cores: int | None) -> None:
    """With workers side by side: torch's threads and inductor's compile threads set to this worker's
    share of the cores, so the workers' threads do not wait on each other for the same cores."""
    global _share
    if not cores:
        return
    _share = cores
    import torch

    torch.set_num_threads(cores)
    try:
        import torch._inductor.config as config

        config.compile_threads = cores
    except Exception:  # a torch without it: inductor picks as it would
        return
