"""What a run depended on, discovered while it ran: the user's source files and the files the model read.

The worker installs a `Recorder` before it imports the model and keeps it for every stage, because
imports and reads also happen lazily inside `forward`. It records:
- every imported module whose file lies outside the standard library and site-packages (decided by
  path, so an editable install of the user's own package counts as user code);
- every file opened for reading while user code is on the stack: the `open` audit event covers
  `open()`, `io.open`, `os.open` and the loaders built on them (`np.load`, `torch.load`, pickle,
  json, yaml); the `mmap.__new__` event covers Python-level mmaps;
- files read by native loaders that raise no audit event: `torch.jit.load` and
  `torch.UntypedStorage.from_file` (what `safetensors` maps its files with) are wrapped, and
  `safetensors.safe_open` is wrapped when safetensors is installed.

Each file is hashed by content as it is loaded (a module as it is imported, a file as it is opened),
not when the stage ends: a run stores its verdicts under what it actually ran, even when the file is
edited meanwhile. `manifest()` gives those hashes; the cache stores them with an entry and a lookup
re-hashes the same paths (`unchanged`), so an edit of any of them, even a same-size one within one
clock tick, is a miss.
"""

from __future__ import annotations

import hashlib
import importlib.util
import os
import site
import stat
import sys
import sysconfig
import tempfile

ABSENT = None  # the manifest's hash for a path that is missing or not a regular file


def library_prefixes() -> tuple[str, ...]:
    """Folders whose files are not the user's: the standard library, site-packages, compatcheck itself."""
    paths = {sysconfig.get_paths()[key] for key in ("stdlib", "platstdlib", "purelib", "platlib")}
    paths.update(site.getsitepackages())
    paths.add(site.getusersitepackages())
    paths.update(p for p in sys.path if os.path.basename(p) in ("site-packages", "dist-packages"))
    paths.add(os.path.dirname(os.path.abspath(__file__)))
    return tuple(sorted({os.path.realpath(p) + os.sep for p in paths if p}))


def _ignored_prefixes(workdir: str) -> tuple[str, ...]:
    # The run's own files, the kernel's pseudo-files, and torch.compile's caches, what it compiles and
    # loads as modules among them: none is model input. Inductor keeps its precompiled headers in its
    # default folder even where TORCHINDUCTOR_CACHE_DIR moves the rest.
    inductor = [os.path.join(tempfile.gettempdir(), "torchinductor_")]
    if os.environ.get("TORCHINDUCTOR_CACHE_DIR"):
        inductor.append(os.environ["TORCHINDUCTOR_CACHE_DIR"])
    return (os.path.realpath(workdir) + os.sep, "/proc/", "/sys/", "/dev/", *map(os.path.realpath, inductor))


def content_hash(path: str) -> str | None:
    """sha256 of a regular file's bytes; None for anything else (missing, folder, FIFO, socket), which
    is never opened, so a FIFO cannot block."""
    try:
        if not stat.S_ISREG(os.stat(path).st_mode):
            return ABSENT
        with open(path, "rb") as f:
            return hashlib.file_digest(f, "sha256").hexdigest()
    except OSError:
        return ABSENT


def unchanged(files: dict[str, str | None], memo: dict[str, str | None] | None = None) -> str | None:
    """None when every file still has its recorded hash, else the first path that changed."""
    memo = {} if memo is None else memo
    for path, digest in files.items():
        if path not in memo:
            memo[path] = content_hash(path)
        if memo[path] != digest:
            return path
    return None


class Recorder:
    def __init__(self, workdir: str):
        self.library = library_prefixes()
        self.ignored = _ignored_prefixes(workdir)
        self.read: set[str] = set()
        self.relative = False  # a relative path was read: the working directory is part of the key
        self.hashes: dict[str, str | None] = {}
        self.modules: dict[str, str | None] = {}  # module file -> its real path when it is user code

    def _user_code_on_stack(self) -> bool:
        frame = sys._getframe(2)
        while frame is not None:
            name = frame.f_code.co_filename
            if name.startswith(os.sep) and not name.startswith(self.library):
                return True
            frame = frame.f_back
        return False

    def note(self, path) -> None:
        """Record a file read, if user code reads it and it is not the run's own or a library file."""
        if isinstance(path, bytes):
            path = os.fsdecode(path)
        if not isinstance(path, str) or not path:
            return
        full = os.path.realpath(path)
        if (full in self.read or full.startswith(self.library) or full.startswith(self.ignored)
                or f"{os.sep}__pycache__{os.sep}" in full or os.path.isdir(full)):
            return  # a folder is opened to walk or remove it (shutil.rmtree): what is read in it is a file
        if self._user_code_on_stack():
            self.read.add(full)
            self.relative |= not os.path.isabs(path)
            self._hash_once(full)

    def _hash_once(self, full: str) -> None:
        """Hash a file as it is first loaded; hashing opens it again, and that open comes back here."""
        if full not in self.hashes:
            self.hashes[full] = ABSENT
            self.hashes[full] = content_hash(full)

    def _imported(self, path: str) -> None:
        """Hash a user module's source as the import opens it (or its cached bytecode)."""
        if path.endswith(".pyc") and f"{os.sep}__pycache__{os.sep}" in path:
            try:
                path = importlib.util.source_from_cache(path)
            except ValueError:
                return
        elif not path.endswith(".py"):
            return
        if not path.startswith(self.library):
            full = os.path.realpath(path)
            if not full.startswith(self.library) and not full.startswith(self.ignored):
                self._hash_once(full)

    def _audit(self, event: str, args: tuple) -> None:
        if event == "open":
            path, mode, flags = args
            reading = (("r" in mode or "+" in mode) if isinstance(mode, str)
                       else (flags & os.O_ACCMODE) != os.O_WRONLY)
            if reading and not isinstance(path, int):
                if isinstance(path, (str, bytes)):
                    self._imported(os.fsdecode(path))
                self.note(path)
        elif event == "mmap.__new__" and args[0] >= 0:
            try:
                self.note(os.readlink(f"/proc/self/fd/{args[0]}"))
            except OSError:
                pass

    def install(self) -> None:
        sys.addaudithook(self._audit)
        import torch

        self._wrap(torch.jit, "load")
        self._wrap(sys.modules["torch.jit._serialization"], "load")
        self._wrap_from_file(torch.UntypedStorage)
        try:
            import safetensors
        except ImportError:
            return
        self._wrap(safetensors, "safe_open")

    def _wrap(self, owner, name: str) -> None:
        """Record the file a loader is given as its first argument."""
        original = getattr(owner, name)
        recorder = self

        def recording(f, *args, **kwargs):
            if isinstance(f, (str, bytes, os.PathLike)):
                recorder.note(os.fspath(f))
            return original(f, *args, **kwargs)

        recording.__wrapped__ = original
        setattr(owner, name, recording)

    def _wrap_from_file(self, storage_class) -> None:
        original = storage_class.from_file
        recorder = self

        def from_file(filename, *args, **kwargs):
            recorder.note(filename)
            return original(filename, *args, **kwargs)

        storage_class.from_file = staticmethod(from_file)

    def manifest(self) -> dict:
        """{"files": {path: sha256 or None}, "cwd": the working directory when a relative path was read}."""
        for module in list(sys.modules.values()):
            path = getattr(module, "__file__", None)
            if isinstance(path, str) and path not in self.modules:
                full = os.path.realpath(path) if os.path.isabs(path) else None
                user = (full and not full.startswith(self.library) and not full.startswith(self.ignored)
                        and f"{os.sep}__pycache__{os.sep}" not in full)
                self.modules[path] = full if user else None
        sources = {full for full in self.modules.values() if full}
        for path in sorted(sources | self.read):
            if path not in self.hashes:
                self.hashes[path] = content_hash(path)
        files = {path: self.hashes[path] for path in sorted(sources | self.read)}
        return {"files": files, "cwd": os.getcwd() if self.relative else None}
