"""Where a run keeps its files: a private working folder, published into --artifacts as stages finish.

Workers only ever write into the run's own temporary folder, so two runs can never read each
other's requests or artifacts. Each finished stage's files are copied into --artifacts at once (a
killed run keeps what it finished, and --resume can use it), and --artifacts is locked for the
run's lifetime: a second run naming the same folder is refused. The temporary folder records its
owner's pid, start time, boot and pid namespace; a later run removes only folders whose owner is gone, and
never one whose owner lives in another pid namespace or machine (a container sharing the temporary
folder), where its pid means nothing here. The owner file keeps the "pid start" form that earlier
releases read, the namespace beside it: an earlier release read a third word as a reused pid and removed
live runs' folders.
"""

from __future__ import annotations

import errno
import fcntl
import functools
import os
import shutil
import tempfile
import threading
import time
from pathlib import Path

from compatcheck.errors import UsageError
from compatcheck.files import copy_into
from compatcheck.worker.inductor import LOCK as INDUCTOR_LOCK

PREFIX = "compatcheck-run-"
OWNER = "owner"
NAMESPACE = "owner-namespace"
LOCK = ".compatcheck.lock"
WORKER_TEMP = "worker-tmp"  # the workers' TMPDIR where the sandbox keeps them from the usual one
PRIVATE = ("worker-request-", OWNER, NAMESPACE, WORKER_TEMP + "/", INDUCTOR_LOCK)  # the run's plumbing, not results
UNOWNED_GRACE = 60.0  # seconds a folder may lack its owner file: the moment between creating it and writing it


def _start_time(pid: int) -> str | None:
    """The process's start time in clock ticks since boot (with the pid, unique across pid reuse)."""
    try:
        return Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()[19]
    except (OSError, IndexError):
        return None


@functools.cache
def _pid_namespace() -> str:
    """Where this process's pid means something: this boot of this machine, and its pid namespace."""
    try:
        boot = Path("/proc/sys/kernel/random/boot_id").read_text().strip()
        return f"{boot}/{os.readlink('/proc/self/ns/pid')}".replace(" ", "")
    except OSError:
        return ""


def _namespace_of(folder: Path) -> str:
    try:
        return (folder / NAMESPACE).read_text().strip()
    except OSError:
        return ""  # an earlier release's run, which wrote none


def _owner_alive(text: str, namespace: str) -> bool:
    pid, started = (text.split() + ["", ""])[:2]
    if namespace and namespace != _pid_namespace():
        return True  # another pid namespace's run: its pid cannot be looked up from here
    try:
        pid = int(pid)
        os.kill(pid, 0)
    except ProcessLookupError:
        return False
    except (ValueError, PermissionError):
        return True  # unreadable or another user's: never ours to remove
    return not started or started == _start_time(pid)


def clean_stale(root: Path | None = None) -> None:
    """Remove working folders that runs killed before they could clean up left behind."""
    root = Path(root or tempfile.gettempdir())
    for folder in root.glob(f"{PREFIX}*"):
        try:
            owner = (folder / OWNER).read_text()
            namespace = _namespace_of(folder)
        except FileNotFoundError:
            try:
                if time.time() - folder.stat().st_mtime < UNOWNED_GRACE:
                    continue
            except OSError:
                continue
            owner = namespace = ""
        except OSError:
            continue
        if not owner or not _owner_alive(owner, namespace):
            shutil.rmtree(folder, ignore_errors=True)


class WorkFolder:
    """The run's private temporary folder, removed by close()."""

    def __init__(self):
        clean_stale()
        self.path = Path(tempfile.mkdtemp(prefix=PREFIX)).resolve()
        # the namespace first: a folder is judged by its owner file only once both are there
        (self.path / NAMESPACE).write_text(_pid_namespace() + "\n")
        (self.path / OWNER).write_text(f"{os.getpid()} {_start_time(os.getpid()) or ''}\n")

    def close(self) -> None:
        shutil.rmtree(self.path, ignore_errors=True)


class Published:
    """The --artifacts folder: locked while the run lives, filled from the working folder. Nothing planted
    there is written through: the lock file is opened without following a link, and files are copied in
    under fresh temporary names (copy_into)."""

    def __init__(self, folder: Path):
        self.folder = Path(folder)
        self.copied: dict[str, tuple[int, int]] = {}
        self.refused: set[str] = set()
        self.unwritten: dict[str, str] = {}  # file -> why it could not be written (a full disk, a planted link)
        self.guard = threading.Lock()  # lanes finish stages from several threads
        try:
            self.lock = os.open(self.folder / LOCK, os.O_RDWR | os.O_CREAT | os.O_NOFOLLOW, 0o644)
        except OSError as exc:
            raise UsageError(f"cannot lock --artifacts {folder}: {self.folder / LOCK}: "
                             f"{'it is a symbolic link' if exc.errno == errno.ELOOP else exc.strerror}") from None
        try:
            fcntl.flock(self.lock, fcntl.LOCK_EX | fcntl.LOCK_NB)
        except BlockingIOError:
            holder = os.read(self.lock, 64).decode(errors="replace").strip() or "unknown"
            os.close(self.lock)
            raise UsageError(f"--artifacts {folder} is in use by another compatcheck run (pid {holder}); "
                             "give each run its own folder") from None
        try:
            os.ftruncate(self.lock, 0)
            os.write(self.lock, str(os.getpid()).encode())
        except OSError:
            pass  # the pid only names the holder in the message above; the lock holds without it (a full disk)

    def sync(self, workdir: Path, protected: set[str] = frozenset()) -> None:
        """Copy what is new or changed in workdir, except files that are inputs of the run (`protected`)."""
        with self.guard:
            for top, _, names in os.walk(workdir):
                for name in names:
                    source = Path(top) / name
                    relative = str(source.relative_to(workdir))
                    if relative.startswith(PRIVATE):
                        continue
                    try:
                        info = source.stat()
                    except OSError:
                        continue
                    signature = (info.st_size, info.st_mtime_ns)
                    target = self.folder / relative
                    if self.copied.get(relative) == signature:
                        continue
                    if str(target.resolve()) in protected:
                        self.refused.add(str(target))
                        continue
                    try:
                        copy_into(source, self.folder, relative)  # readers never see half a file
                    except FileNotFoundError:  # the worker removed it meanwhile: a skipped stage's reproducer
                        continue
                    except (OSError, ValueError) as exc:
                        self.unwritten[str(target)] = getattr(exc, "strerror", None) or str(exc)
                        continue
                    self.unwritten.pop(str(target), None)
                    self.copied[relative] = signature

    def path_of(self, workdir: Path, path: str) -> str:
        """Where a file of the working folder lies in --artifacts."""
        try:
            return str(self.folder / Path(path).relative_to(workdir))
        except ValueError:
            return path  # already outside the working folder: kept from a resumed run

    def close(self) -> None:
        os.close(self.lock)
