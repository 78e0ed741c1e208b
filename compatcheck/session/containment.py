"""Everything a worker starts, found and ended, even what left its process group or outlived it.

Each worker gets a cgroup of its own where a writable cgroup hierarchy is mounted (a process cannot
leave it), and always an environment mark its descendants inherit. When a worker ends, every
process in its cgroup or carrying its mark is killed. A watchdog process outside the run holds a
pipe from compatcheck; if compatcheck dies without saying goodbye (kill -9), the watchdog ends
every process of the run and removes its temporary folder.

`python -m compatcheck.session.containment RUN_ID CGROUP|- [FOLDER]` is the watchdog.
"""

from __future__ import annotations

import ctypes
import os
import shutil
import signal
import subprocess
import sys
import time
import uuid
from pathlib import Path

MARK = "COMPATCHECK_RUN"
_PR_SET_PDEATHSIG = 1
# Looked up here, not in the forked child, where loading a library could wait on a lock forever.
_prctl = ctypes.CDLL(None, use_errno=True).prctl if sys.platform.startswith("linux") else None
GOODBYE = b"done\n"


def _cgroup_base() -> Path | None:
    """This process's own cgroup in a hierarchy where we may make children: v2, else v1's pids."""
    try:
        mounts = Path("/proc/self/mounts").read_text().splitlines()
        own = Path("/proc/self/cgroup").read_text().splitlines()
    except OSError:
        return None
    paths = {}
    for line in own:
        number, controllers, path = line.split(":", 2)
        paths["cgroup2" if number == "0" else controllers] = path
    points = {}
    for line in mounts:
        _, point, kind, flags = line.split()[:4]
        if kind == "cgroup2":
            points.setdefault("cgroup2", point)
        elif kind == "cgroup" and "pids" in flags.split(","):
            points.setdefault("pids", point)
    for key in ("cgroup2", "pids"):
        if key in points and key in paths:
            base = Path(points[key]) / paths[key].lstrip("/")
            if os.access(base, os.W_OK):
                return base
    return None


def _environ_has(pid: str, needle: bytes) -> bool:
    try:
        return needle in b"\0" + Path(f"/proc/{pid}/environ").read_bytes()
    except OSError:
        return False


def members(mark: str, cgroup: Path | None) -> set[int]:
    """Live processes of the run or worker: in the cgroup (and its children) or carrying the mark."""
    found: set[int] = set()
    if cgroup is not None:
        for procs in cgroup.rglob("cgroup.procs"):
            try:
                found.update(int(pid) for pid in procs.read_text().split())
            except OSError:
                continue
    needle = f"\0{MARK}={mark}".encode()
    for entry in os.listdir("/proc") if os.path.isdir("/proc") else ():
        if entry.isdigit() and _environ_has(entry, needle):
            found.add(int(entry))
    found.discard(os.getpid())
    return found


def end(mark: str, cgroup: Path | None, wait_s: float = 5.0) -> None:
    """Kill every member until none is left, then remove the cgroup."""
    deadline = time.monotonic() + wait_s
    while True:
        alive = members(mark, cgroup)
        for pid in alive:
            try:
                os.kill(pid, signal.SIGKILL)
            except (ProcessLookupError, PermissionError):
                pass
        if not alive or time.monotonic() > deadline:
            break
        time.sleep(0.05)
    if cgroup is not None:
        for folder in sorted((p for p in [cgroup, *cgroup.rglob("*")] if p.is_dir()), key=lambda p: -len(p.parts)):
            for _ in range(50):  # a killed process leaves its cgroup a moment after it is reaped
                try:
                    folder.rmdir()
                    break
                except FileNotFoundError:
                    break
                except OSError:
                    time.sleep(0.02)


class Box:
    """One worker's cgroup and mark."""

    def __init__(self, mark: str, cgroup: Path | None):
        self.mark = mark
        self.cgroup = cgroup
        self.env = {MARK: mark}

    def enter(self, parent: int) -> None:
        """In the child, before exec: join the cgroup and die with the parent."""
        if self.cgroup is not None:
            try:
                (self.cgroup / "cgroup.procs").write_text(str(os.getpid()))
            except OSError:
                pass  # the mark still finds what it starts
        if _prctl is not None:
            _prctl(_PR_SET_PDEATHSIG, signal.SIGKILL)
            if os.getppid() != parent:  # the parent died before prctl took hold
                os._exit(1)

    def end(self) -> None:
        end(self.mark + "\0", self.cgroup)


class Containment:
    """One run's boxes, and the watchdog that ends them if compatcheck dies first."""

    def __init__(self, temporary_folder: Path | None = None):
        self.id = uuid.uuid4().hex[:12]
        self.cgroup: Path | None = None
        base = _cgroup_base()
        if base is not None:
            try:
                (base / f"compatcheck-{self.id}").mkdir()
                self.cgroup = base / f"compatcheck-{self.id}"
            except OSError:
                self.cgroup = None
        self.count = 0
        read, self.goodbye = os.pipe()
        self.watchdog = subprocess.Popen(
            [sys.executable, "-m", "compatcheck.session.containment", self.id, str(self.cgroup or "-"),
             *([str(temporary_folder)] if temporary_folder else [])],
            stdin=read, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL,
            start_new_session=True,  # Ctrl-C on the terminal must not take it down before it cleans up
        )
        os.close(read)

    def box(self) -> Box:
        self.count += 1
        cgroup = None
        if self.cgroup is not None:
            try:
                (self.cgroup / f"worker-{self.count}").mkdir()
                cgroup = self.cgroup / f"worker-{self.count}"
            except OSError:
                cgroup = None
        return Box(f"{self.id}/{self.count}", cgroup)

    def close(self) -> None:
        """End whatever is left and let the watchdog go."""
        end(f"{self.id}/", self.cgroup)
        if self.goodbye is not None:
            os.write(self.goodbye, GOODBYE)
            os.close(self.goodbye)
            self.goodbye = None
            self.watchdog.wait()


def _watch(run_id: str, cgroup: str, folder: str | None) -> None:
    said = sys.stdin.buffer.read()  # returns when compatcheck closes the pipe, or dies
    if said == GOODBYE:
        return
    end(f"{run_id}/", None if cgroup == "-" else Path(cgroup), wait_s=30)
    if folder:
        shutil.rmtree(folder, ignore_errors=True)


if __name__ == "__main__":
    signal.signal(signal.SIGINT, signal.SIG_IGN)
    _watch(sys.argv[1], sys.argv[2], sys.argv[3] if len(sys.argv) > 3 else None)
