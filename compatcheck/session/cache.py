"""A cache of stage results keyed by what the run really depended on, so a stale verdict is never served.

An entry is found in two steps, the way ccache's manifests work:
1. The run key (`RunKey`) names a folder. It hashes what is known before anything runs:
   - compatcheck's version and the content of its own files (a few milliseconds): another version,
     or a checkout edited since, may decide differently (the seeds every run uses live there too);
   - the model's path and factory, and the options (and the --rewrites catalog's bytes, since
     findings carry its rewrites): they say what was run and how;
   - the interpreter (version and executable): bytecode, C extensions and torch builds differ;
   - every installed distribution's name and version, read from the `*.dist-info`/`*.egg-info`
     folder names (milliseconds): an upgrade of any package the model may use (transformers,
     timm, ...) can change a verdict, and no fixed list can name them all;
   - the environment variables that change how torch, its kernels, onnxruntime, Triton or the
     model behave (TORCH_*, OMP_*, CUDA_*, PYTHONPATH, ...). Values of secret-looking names are
     hashed before they enter the key, and the key's description on disk holds only those hashes.
2. Under it, one entry per state of the run's dependencies: the manifest the worker recorded while
   it ran (see loaded_files.py: the user's Python sources, wherever they were imported from, and
   every file the model read) with a content hash per file. A lookup re-hashes the listed files and
   serves an entry only when every hash matches; a path read relative to the working directory
   also needs the same working directory.

Only verdicts that a rerun would repeat are stored (pass, mismatch, fail); crashes, timeouts and
skips are always run again. An entry holds everything a cold run leaves in --artifacts for the
stage: its artifact, `inputs.npz`, its `reproduce_<stage>.py` and the end of the log of the worker that
computed it: the last LOG_KEPT bytes, under a line saying how much was cut (a model that prints megabytes
per call would otherwise fill the cache with copies of its output, one per stage); the cut is reported
as the stage's `cached_from.log_cut`.

The cache folder may have been written by someone else (a cache shared on a build machine, a CI
cache restored from another branch's job), so nothing in it is believed unproven. Each entry is
tagged with HMAC-SHA256 under a key kept outside the cache (`COMPATCHECK_CACHE_KEY`, else a private
key file in the user's state folder, made on first use), over its run key, stage and content, and
the content lists every file of the entry with its sha256. An entry is served only when its tag
verifies, it and its files are this user's and writable by no one else, no file is a link, every
file name stays inside the entry, and every file copied out has its recorded hash; any other entry
is ignored with one line saying why, and the stage runs. So what a stage later loads with a loader
that can run code (torch.export.load, torch.jit.load) is only ever what this user's own run stored.
`clear` removes only what has the shape of an entry, whatever else the folder holds.
"""

from __future__ import annotations

import errno
import functools
import hashlib
import hmac
import json
import os
import re
import secrets
import shutil
import stat
import sys
import tempfile
import time
from dataclasses import dataclass
from pathlib import Path
from typing import Callable

from compatcheck import __version__, ladder, redact
from compatcheck.files import copy_into, real_folder, write_atomically
from compatcheck.loaded_files import unchanged
from compatcheck.host import RELEVANT
from compatcheck.options import cache_key_values
from compatcheck.report.model import CacheOrigin, ModelInfo, StageResult, Status

CACHEABLE = {Status.PASS, Status.MISMATCH, Status.FAIL}
KEY_VARIABLES = re.compile(
    RELEVANT.pattern + r"|^(PYTHONPATH|PYTHONHASHSEED|LD_LIBRARY_PATH|LD_PRELOAD|KMP_.*|HF_.*|TRANSFORMERS_.*|"
    r"TOKENIZERS_.*|COMPATCHECK_TRITONSERVER|COMPATCHECK_SANDBOX)$")
SECRET_VARIABLE = "COMPATCHECK_CACHE_KEY"
ENTRY = "entry.json"
LOG = "worker.log"
LOG_KEPT = 8192  # bytes of a worker's log an entry keeps: its end, where the errors are
INPUTS = "inputs.npz"
KEY_FACTS = "key.json"
STAGING = ".staging-"
RUN_KEY = re.compile(r"^[0-9a-f]{32}$")
IDENTITY = re.compile(r"^[0-9a-f]{16}$")


class Unusable(Exception):
    """Why this run cannot use the cache at all: its key cannot be had."""


class Untrusted(Exception):
    """Why one entry is not served."""


def key_file() -> Path:
    base = Path(os.environ.get("XDG_STATE_HOME") or Path.home() / ".local" / "state")
    return base / "compatcheck" / "cache.key"


def _read_key(path: Path) -> bytes:
    try:
        fd = os.open(path, os.O_RDONLY | os.O_NOFOLLOW)
    except FileNotFoundError:
        raise
    except OSError as exc:
        raise Unusable(f"its key file {path} cannot be read: {exc.strerror}") from None
    try:
        info = os.fstat(fd)
        if info.st_uid != os.getuid() or info.st_mode & 0o077:
            raise Unusable(f"its key file {path} is not private to this user (owner uid {info.st_uid}, "
                           f"mode {stat.filemode(info.st_mode)})")
        key = os.read(fd, 4096).strip()
    finally:
        os.close(fd)
    if len(key) < 32:
        raise Unusable(f"its key file {path} holds no key; remove it and one is made")
    return key


def secret_key() -> bytes:
    """The key entries are tagged with: COMPATCHECK_CACHE_KEY, else the user's key file, made on first use."""
    given = os.environ.get(SECRET_VARIABLE)
    if given:
        return given.encode()
    path = key_file()
    try:
        return _read_key(path)
    except FileNotFoundError:
        pass
    try:
        path.parent.mkdir(parents=True, exist_ok=True, mode=0o700)
        fd, made = tempfile.mkstemp(prefix=".cache.key.", dir=path.parent)  # private from the start
        try:
            os.write(fd, secrets.token_hex(32).encode() + b"\n")
            os.close(fd)
            os.link(made, path)  # the key appears whole, and a key another run made meanwhile wins
        except FileExistsError:
            pass
        finally:
            os.unlink(made)
    except OSError as exc:
        raise Unusable(f"its key file {path} cannot be made: {exc.strerror}") from None
    return _read_key(path)


def _untrusted(info: os.stat_result) -> str | None:
    """Why a file or folder of the cache, as lstat sees it, is not this user's alone."""
    if stat.S_ISLNK(info.st_mode):
        return "is a symbolic link"
    if info.st_uid != os.getuid():
        return f"belongs to uid {info.st_uid}, not to this user"
    if info.st_mode & 0o022:
        return "is writable by others"
    return None


def _inside(name: str) -> bool:
    """A relative name that stays in its folder: no '..', no absolute path, nothing empty."""
    return isinstance(name, str) and "\0" not in name and all(part not in ("", ".", "..") for part in name.split("/"))


def default_dir() -> Path:
    if os.environ.get("COMPATCHECK_CACHE_DIR"):
        return Path(os.environ["COMPATCHECK_CACHE_DIR"])
    base = Path(os.environ.get("XDG_CACHE_HOME") or Path.home() / ".cache")
    return base / "compatcheck" / "stages"


def distributions() -> list[str]:
    """Every installed distribution as its metadata folder's name ('torch-2.13.0.dist-info')."""
    found = set()
    for folder in sys.path:
        if folder and os.path.isdir(folder) and os.path.realpath(folder) != os.path.realpath(os.getcwd()):
            found.update(name for name in os.listdir(folder) if name.endswith((".dist-info", ".egg-info")))
    return sorted(found)


def key_variables() -> dict[str, str]:
    return {name: "sha256:" + hashlib.sha256(value.encode()).hexdigest() if redact.SECRET_NAME.search(name) else value
            for name, value in sorted(os.environ.items())
            if KEY_VARIABLES.match(name)}


@functools.cache
def own_source() -> str:
    """sha256 over compatcheck's own .py and .yaml files, by path and content."""
    package = Path(__file__).resolve().parents[1]
    digest = hashlib.sha256()
    for path in sorted(p for p in package.rglob("*") if p.suffix in (".py", ".yaml") and "__pycache__" not in p.parts):
        digest.update(str(path.relative_to(package)).encode() + b"\0" + path.read_bytes())
    return digest.hexdigest()


def run_key(model: Path, factory: str, options, payload: bytes | None = None) -> tuple[str, dict]:
    """(the run key, what it hashes); `payload` is a model object's (payload.py): its weights, its
    structure, the classes carried by value and the inputs."""
    facts = {
        "compatcheck": __version__, "compatcheck_source": own_source(), "model": str(model), "factory": factory,
        **({"payload": hashlib.sha256(payload).hexdigest()} if payload is not None else {}),
        "options": cache_key_values(options),
        "rewrites": hashlib.sha256(Path(options.rewrites).read_bytes()).hexdigest() if options.rewrites else None,
        "python": sys.version, "executable": sys.executable, "distributions": distributions(),
        "environment": key_variables(),
    }
    facts = redact.fingerprinted(facts)  # written beside the cache entries: a password in a URL must not be
    return hashlib.sha256(json.dumps(facts, sort_keys=True, default=str).encode()).hexdigest()[:32], facts


@dataclass
class Hit:
    result: StageResult
    model: ModelInfo
    environment: dict
    dependencies: dict
    run: str  # which worker computed it: entries of one worker share its log
    log: bytes  # that worker's log, as stored


def tag(key: bytes, run_key: str, stage: str, body: bytes) -> str:
    """An entry's tag: HMAC-SHA256 under the key, over the run key and stage it is filed under and its content."""
    return hmac.new(key, f"{run_key}/{stage}\0".encode() + body, hashlib.sha256).hexdigest()


def log_tail(log: Path) -> tuple[bytes, int]:
    """The end of a worker's log as an entry keeps it, redacted (the model's own output may quote a secret),
    and how many bytes before it were cut."""
    text, cut = redact.file_tail(log, LOG_KEPT)
    if not cut:
        return text.encode(), 0
    note = f"[compatcheck: the cache keeps the last {LOG_KEPT} bytes of a worker's log; the {cut} before them were cut]"
    return (note + "\n").encode() + text.encode()[-LOG_KEPT:], cut


def _files_under(workdir: Path, name: str) -> list[str]:
    """The regular files an artifact consists of (itself, or those in its folder), relative to workdir."""
    path = workdir / name
    if not path.is_dir():
        return [name] if path.is_file() else []
    return sorted(str(Path(top, file).relative_to(workdir)) for top, _, files in os.walk(path) for file in files)


class StageCache:
    def __init__(self, root: Path, model: Path, factory: str, options, payload: bytes | None = None,
                 say: Callable[[str], None] = lambda line: None):
        self.root = root
        self.key, self.facts = run_key(model, factory, options, payload)
        self.secret = secret_key()
        self.folder = root / self.key
        self.say = say
        self._hashes: dict[str, str | None] = {}  # one hash per file per lookup, shared by every stage
        self._said_unstored = False

    def load(self, stage: str, workdir: Path) -> Hit | None:
        """The newest entry of `stage` whose dependencies are unchanged, its files copied into workdir; an
        entry that is not proven this user's own is skipped with a line saying why."""
        try:
            entries = sorted(((e, e.lstat().st_mtime_ns) for e in (self.folder / stage).iterdir()
                              if IDENTITY.match(e.name)), key=lambda pair: pair[1], reverse=True)
        except OSError:
            return None
        for entry, _ in entries:
            try:
                stored = self._verified(stage, entry)
                manifest = stored["dependencies"]
                if manifest["cwd"] not in (None, os.getcwd()) or unchanged(manifest["files"], self._hashes):
                    continue
                return self._served(stored, entry, workdir)
            except Untrusted as exc:
                self.say(f"cache entry {entry} ignored, the stage runs: {exc}")
            except (OSError, ValueError, KeyError, TypeError) as exc:
                self.say(f"cache entry {entry} ignored, the stage runs: it cannot be read ({exc})")
        return None

    def _read(self, path: Path) -> bytes:
        """A file of an entry, read only when it is this user's alone and not a link."""
        try:
            fd = os.open(path, os.O_RDONLY | os.O_NOFOLLOW | os.O_NONBLOCK)
        except OSError as exc:
            if exc.errno == errno.ELOOP:
                raise Untrusted(f"{path.name} is a symbolic link") from None
            raise
        try:
            info = os.fstat(fd)
            why = "is not a regular file" if not stat.S_ISREG(info.st_mode) else _untrusted(info)
            if why:
                raise Untrusted(f"{path.name} {why}")
            with os.fdopen(os.dup(fd), "rb") as f:
                return f.read()
        finally:
            os.close(fd)

    def _verified(self, stage: str, entry: Path) -> dict:
        """The entry's content, once its folder, its tag and its file names are proven."""
        why = _untrusted(entry.lstat())
        if why:
            raise Untrusted(f"the entry {why}")
        try:
            given, body = self._read(entry / ENTRY).split(b"\n", 1)
        except FileNotFoundError:
            raise Untrusted(f"it has no {ENTRY}") from None
        except ValueError:
            raise Untrusted(f"its {ENTRY} is not an entry of this compatcheck") from None
        if not hmac.compare_digest(given, tag(self.secret, self.key, stage, body).encode()):
            raise Untrusted("its tag does not verify: it was not stored by this user's compatcheck under this "
                            f"cache key ({SECRET_VARIABLE} or the key file), or it was changed since")
        stored = json.loads(body)
        names = [*stored["files"], *stored["artifacts"].values()]
        if not all(_inside(name) for name in names):
            raise Untrusted("a file name in it leads out of the entry")
        return stored

    def _served(self, stored: dict, entry: Path, workdir: Path) -> Hit:
        """The hit, every file copied out of the entry with its hash checked on the way; nothing is left in
        workdir when one does not match."""
        copied = []
        try:
            for name, digest in stored["files"].items():
                copy_into(entry / name, workdir, name, expect=digest, check=_untrusted)
                copied.append(name)
            if stored["inputs"] and not (workdir / INPUTS).exists():
                copy_into(entry / INPUTS, workdir, INPUTS, expect=stored["inputs"], check=_untrusted)
                copied.append(INPUTS)
            log = self._read(entry / LOG) if stored["log"] else b""
            if stored["log"] and hashlib.sha256(log).hexdigest() != stored["log"]:
                raise Untrusted(f"{LOG} does not hold the bytes it was stored with")
        except ValueError as exc:
            self._remove(workdir, copied)
            raise Untrusted(str(exc)) from None
        except BaseException:
            self._remove(workdir, copied)
            raise
        result = StageResult.model_validate(stored["result"])
        result.cached, result.cached_from = True, CacheOrigin.model_validate(stored["computed"])
        result.artifacts = {key: str(workdir / name) for key, name in stored["artifacts"].items()}
        return Hit(result, ModelInfo.model_validate(stored["model"]), stored["environment"], stored["dependencies"],
                   stored["run"], log)

    @staticmethod
    def _remove(workdir: Path, names: list[str]) -> None:
        for name in names:
            (workdir / name).unlink(missing_ok=True)

    def _own_folder(self, stage: str) -> Path:
        """root/run key/stage, made private, refusing a link or a folder someone else made there."""
        self.root.mkdir(parents=True, exist_ok=True, mode=0o700)
        folder = real_folder(self.root, (self.key, stage), mode=0o700)
        for path in (self.folder, folder):
            why = _untrusted(path.lstat())
            if why:
                raise ValueError(f"{path} {why}")
        return folder

    def store(self, result: StageResult, model: ModelInfo, environment: dict, dependencies: dict, run: str,
              computed: CacheOrigin, workdir: Path, log: Path) -> None:
        """Store a stage's result under the dependencies its worker recorded as it loaded them."""
        if result.status not in CACHEABLE or not dependencies:
            return
        identity = hashlib.sha256(json.dumps(dependencies, sort_keys=True).encode()).hexdigest()[:16]
        try:
            entry = self._own_folder(result.name) / identity
            if not (self.folder / KEY_FACTS).exists():
                write_atomically(self.folder / KEY_FACTS, json.dumps(self.facts, indent=1, default=str))
            staging = Path(tempfile.mkdtemp(prefix=STAGING, dir=self.root))
        except (OSError, ValueError) as exc:
            return self._not_stored(exc)
        try:
            artifacts = {key: str(Path(path).relative_to(workdir)) for key, path in result.artifacts.items()}
            files = {}
            for name in (*artifacts.values(), f"reproduce_{result.name}.py"):
                for file in _files_under(workdir, name):
                    files[file] = copy_into(workdir / file, staging, file)
            inputs = copy_into(workdir / INPUTS, staging, INPUTS) if (workdir / INPUTS).is_file() else None
            logged = None
            if log.is_file():
                text, cut = log_tail(log)
                (staging / LOG).write_bytes(text)
                logged = hashlib.sha256(text).hexdigest()
                computed = computed.model_copy(update={"log_cut": cut})
            body = json.dumps({
                "result": result.model_dump(mode="json", exclude={"artifacts", "cached", "cached_from"}),
                "artifacts": artifacts, "files": files, "inputs": inputs, "log": logged,
                "model": model.model_dump(mode="json"), "environment": environment, "dependencies": dependencies,
                "run": run, "computed": computed.model_dump()}, sort_keys=True).encode()
            # The tag on the first line, the content it covers after it: read back with one parse.
            (staging / ENTRY).write_bytes(tag(self.secret, self.key, result.name, body).encode() + b"\n" + body)
            if entry.is_symlink() or entry.is_file():
                entry.unlink()
            elif entry.exists():
                shutil.rmtree(entry)
            os.replace(staging, entry)  # whole entries appear at once, never half-written
        except (OSError, ValueError) as exc:
            shutil.rmtree(staging, ignore_errors=True)
            self._not_stored(exc)

    def _not_stored(self, error: Exception) -> None:
        """One line per run: the verdicts stand, only the cache misses them."""
        if not self._said_unstored:
            self._said_unstored = True
            self.say(f"results not cached in {self.root}: {getattr(error, 'strerror', None) or error}")


def entries(root: Path):
    """Every folder under root that has the shape of a cache entry: run key/stage/identity/entry.json."""
    for key in _children(root, RUN_KEY):
        for stage in _children(key, None):
            if stage.name in ladder.BY_NAME:
                yield from (entry for entry in _children(stage, IDENTITY) if (entry / ENTRY).is_file())


def _children(folder: Path, pattern: re.Pattern | None):
    """The real folders (not links) in `folder` whose names match."""
    try:
        children = sorted(folder.iterdir())
    except OSError:
        return []
    return [child for child in children if (pattern is None or pattern.match(child.name))
            and child.is_dir() and not child.is_symlink()]


def summary(root: Path) -> dict:
    """What `compatcheck cache info` shows: size, entries per stage, and what else is in the folder."""
    size, stages, newest = 0, {}, None
    for entry in entries(root):
        stages[entry.parent.name] = stages.get(entry.parent.name, 0) + 1
        newest = max(newest or 0, (entry / ENTRY).stat().st_mtime)
        size += sum(path.lstat().st_size for path in entry.rglob("*") if not path.is_dir())
    own = {path.name for path in _children(root, RUN_KEY)}
    others = [path for path in (root.iterdir() if root.is_dir() else ())
              if path.name not in own and not path.name.startswith(STAGING)]
    return {"folder": str(root), "bytes": size, "entries": sum(stages.values()), "by_stage": stages,
            "newest": time.strftime("%Y-%m-%d %H:%M:%S", time.localtime(newest)) if newest else None,
            "others": len(others)}


def clear(root: Path) -> int:
    """Remove every entry, and the folders they leave empty; returns how many there were. Nothing that is
    not recognisably the cache's is touched: the folder may be a typo for one of the user's own."""
    count = 0
    for entry in list(entries(root)):
        shutil.rmtree(entry, ignore_errors=True)
        count += 1
    for key in _children(root, RUN_KEY):
        (key / KEY_FACTS).unlink(missing_ok=True)
        for folder in (*_children(key, None), key):
            try:
                folder.rmdir()  # only once empty: anything else in it is not the cache's
            except OSError:
                pass
    for staging in root.glob(STAGING + "*") if root.is_dir() else ():
        if staging.is_dir() and not staging.is_symlink():
            shutil.rmtree(staging, ignore_errors=True)
    return count
