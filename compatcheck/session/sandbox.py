"""What a worker may not touch: the result cache's key and the cache, which only this process reads and
writes, so that the model under test cannot sign an entry that another model's run would be served.

Two layers, both set up here when a worker starts:
- its environment holds no COMPATCHECK_* variable (the key among them) but the ones it needs;
- where the kernel offers Landlock (Linux 5.13+, unprivileged), the worker starts in a Landlock
  domain that grants it everything it could reach before, except beneath the key's folder and the
  cache folder. Landlock only grants, so the grant is a rule for each entry at every level of the
  paths down to those folders, as the folders' ancestors hold them when the worker starts; the
  ancestors themselves may be listed, not written. A Landlock domain also keeps the worker out of
  other processes' memory (/proc/<pid>/mem), though not out of their /proc/<pid>/environ: a key
  given in this process's environment is blanked in the block that file shows (`hide_from_environ`).

The system calls go through ctypes: Landlock is three system calls and two small structs, and the
maintained bindings wrap the same calls with more to install.
"""

from __future__ import annotations

import ctypes
import getpass
import os
import re
import sys
import tempfile
from dataclasses import dataclass
from pathlib import Path

from compatcheck.protocol import SandboxFolders
from compatcheck.session.containment import MARK
from compatcheck.session.workfolder import WORKER_TEMP

# What the worker keeps of COMPATCHECK_*: the mark its descendants are found by, and the Triton server
# binary the user chose for the triton stage; neither is a secret.
KEPT = {MARK, "COMPATCHECK_TRITONSERVER"}
SWITCH = "COMPATCHECK_SANDBOX"

_CREATE_RULESET, _ADD_RULE, _RESTRICT_SELF = 444, 445, 446  # the same number on every architecture
_CREATE_RULESET_VERSION = 1
_RULE_PATH_BENEATH = 1
_PR_SET_NO_NEW_PRIVS = 38
_READ_DIR = 1 << 3
# The file system rights each ABI handles: 13 in ABI 1, then REFER (2), TRUNCATE (3), IOCTL_DEV (5).
_RIGHTS = {1: (1 << 13) - 1, 2: (1 << 14) - 1, 3: (1 << 15) - 1, 4: (1 << 15) - 1}
_ALL_RIGHTS = (1 << 16) - 1
# The rights a rule on a file that is not a folder may hold: execute, write, read, truncate, ioctl.
_FILE_RIGHTS = 1 << 0 | 1 << 1 | 1 << 2 | 1 << 14 | 1 << 15

_UNSAFE = re.compile(r'[\\/:*?"<>|]')  # what torch replaces in the user's name for its compile cache's folder

_SYSTEM_TEMP = Path(os.path.realpath("/tmp"))

_libc = ctypes.CDLL(None, use_errno=True) if sys.platform.startswith("linux") else None


class _PathBeneath(ctypes.Structure):
    _pack_ = 1
    _fields_ = [("allowed_access", ctypes.c_uint64), ("parent_fd", ctypes.c_int32)]


def _switched_off() -> bool:
    return os.environ.get(SWITCH, "").lower() == "off"


def landlock_abi() -> int | None:
    """The kernel's Landlock ABI version, or None where Landlock is missing, disabled, or switched off
    (COMPATCHECK_SANDBOX=off: for a model that must make files beside the protected folders)."""
    if _libc is None or _switched_off():
        return None
    version = _libc.syscall(_CREATE_RULESET, None, ctypes.c_size_t(0), ctypes.c_uint32(_CREATE_RULESET_VERSION))
    return version if version > 0 else None


def protected_folders() -> list[Path]:
    """The key's folder and the cache folder, as the kernel resolves them."""
    from compatcheck.session.cache import default_dir, key_file

    return [Path(os.path.realpath(folder)) for folder in (key_file().parent, default_dir())]


def _within(path: Path, folder: Path) -> bool:
    return path == folder or folder in path.parents


def _ancestors(protected: list[Path]) -> set[Path]:
    """Every folder on the way down to a protected folder."""
    return {parent for folder in protected for parent in folder.parents}


def _grants(protected: list[Path]) -> list[tuple[Path, bool]]:
    """The entries granted whole, with whether each is a folder: everything in each ancestor but the
    ancestors and protected folders themselves, and what leads into them by a link."""
    on_the_way = _ancestors(protected)
    granted = []
    for ancestor in sorted(on_the_way):
        try:
            names = os.listdir(ancestor)
        except OSError:
            continue
        for name in names:
            entry = ancestor / name
            target = Path(os.path.realpath(entry))
            if entry in on_the_way or any(_within(entry, f) or _within(target, f) or _within(f, target)
                                          for f in protected):
                continue
            granted.append((entry, target.is_dir()))
    return granted


@dataclass
class Sandbox:
    """One worker's Landlock domain, made in the parent and entered by the worker before it runs."""

    abi: int | None
    protected: list[Path]
    why_not: str | None = None  # why there is no domain, where the kernel has Landlock

    @classmethod
    def here(cls) -> "Sandbox":
        from compatcheck.session.cache import SECRET_VARIABLE

        hide_from_environ(SECRET_VARIABLE)
        abi, protected = landlock_abi(), protected_folders()
        # Under /tmp, the domain would leave nothing new to make in /tmp itself, which programs name
        # outright (Triton's Python backend makes its folders there): no domain rather than false fails.
        under = next((str(folder) for folder in protected if _within(folder, _SYSTEM_TEMP)), None)
        return cls(None, protected, f"{under} is under /tmp") if abi and under else cls(abi, protected)

    def describe(self) -> str:
        """The report's line on whether the model could reach the cache's key."""
        if self.abi:
            return f"out of the model's reach (Landlock ABI {self.abi}: no key, no cache folder in the worker)"
        why = self.why_not or ("COMPATCHECK_SANDBOX=off" if _switched_off() else "this kernel has no Landlock")
        return (f"readable by the model under test: {why}, so the key file and compatcheck's memory are open "
                "to the worker (docs: Isolation and safety)")

    def folders(self) -> SandboxFolders:
        """Where a worker starting now can make nothing new, for its diagnosis: the ancestors this user
        could otherwise write in (elsewhere the sandbox is not what refuses), and the protected folders;
        none without Landlock."""
        if not self.abi:
            return SandboxFolders()
        refusing = [str(folder) for folder in sorted(_ancestors(self.protected)) if os.access(folder, os.W_OK)]
        return SandboxFolders(refusing=refusing, protected=[str(folder) for folder in self.protected])

    def ruleset(self) -> int | None:
        """A Landlock ruleset's file descriptor for a worker starting now, or None without Landlock."""
        if not self.abi:
            return None
        handled = _RIGHTS.get(self.abi, _ALL_RIGHTS)
        attr = ctypes.c_uint64(handled)
        fd = _libc.syscall(_CREATE_RULESET, ctypes.byref(attr), ctypes.c_size_t(8), ctypes.c_uint32(0))
        if fd < 0:
            return None
        for ancestor in sorted(_ancestors(self.protected)):
            _add_rule(fd, ancestor, _READ_DIR)
        for entry, is_folder in _grants(self.protected):
            _add_rule(fd, entry, handled if is_folder else handled & _FILE_RIGHTS)
        return fd

    def environment(self, environ: dict, workdir: Path) -> dict:
        """The worker's environment: no COMPATCHECK_* but KEPT; its temporary files go to the run's own
        folder where the temporary folder is on the way to a protected one (nothing new can be made there)."""
        env = {name: value for name, value in environ.items() if not name.startswith("COMPATCHECK_") or name in KEPT}
        temporary = Path(os.path.realpath(tempfile.gettempdir()))
        if self.abi and (temporary in _ancestors(self.protected)
                         or any(_within(temporary, folder) for folder in self.protected)):
            own = workdir / WORKER_TEMP
            own.mkdir(exist_ok=True)
            env["TMPDIR"] = str(own)
            if "TORCHINDUCTOR_CACHE_DIR" not in env:  # torch's compile cache stays where it is, shared by runs
                inductor = temporary / ("torchinductor_" + _UNSAFE.sub("_", getpass.getuser()))
                inductor.mkdir(mode=0o700, exist_ok=True)
                env["TORCHINDUCTOR_CACHE_DIR"] = str(inductor)
        return env


def hide_from_environ(name: str) -> None:
    """Blank `name`'s value in this process's initial environment block, which other processes of the user
    read as /proc/<pid>/environ; libc's environment keeps the value in a copy of its own first, so what this
    process starts still inherits it."""
    value = os.environ.get(name, "").encode()
    if not value:
        return
    os.putenv(name, os.environ[name])
    try:
        fields = Path("/proc/self/stat").read_text().rsplit(")", 1)[1].split()
        start, end = int(fields[47]), int(fields[48])  # env_start and env_end, fields 50 and 51
        with open("/proc/self/mem", "r+b", buffering=0) as memory:
            memory.seek(start)
            block = b"\0" + memory.read(end - start)
            at = block.find(b"\0" + name.encode() + b"=" + value + b"\0")
            if at >= 0:
                memory.seek(start + at + len(name) + 1)
                memory.write(b"\0" * len(value))
    except (OSError, ValueError, IndexError):
        pass  # no /proc here: nothing shows the block to other processes either


def _add_rule(ruleset: int, path: Path, rights: int) -> None:
    """Grant `rights` beneath `path`; an entry that vanished or cannot be opened is simply not granted."""
    try:
        fd = os.open(path, os.O_PATH | os.O_CLOEXEC)
    except OSError:
        return
    try:
        rule = _PathBeneath(rights, fd)
        _libc.syscall(_ADD_RULE, ctypes.c_int(ruleset), ctypes.c_int(_RULE_PATH_BENEATH), ctypes.byref(rule),
                      ctypes.c_uint32(0))
    finally:
        os.close(fd)


def enter(ruleset: int | None) -> None:
    """In the worker, before exec: enter the domain (no new privileges first, as Landlock asks); a worker
    that cannot is not started."""
    if ruleset is None:
        return
    if _libc.prctl(_PR_SET_NO_NEW_PRIVS, 1, 0, 0, 0) != 0 or _libc.syscall(_RESTRICT_SELF, ruleset, 0) != 0:
        os._exit(70)
