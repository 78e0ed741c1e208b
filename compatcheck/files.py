"""Writing files so that no reader sees half of one and no link is written through; reading the JSON and
YAML files users and others give, within bounds."""

from __future__ import annotations

import errno
import hashlib
import json
import os
import stat
import tempfile
from pathlib import Path
from typing import Callable

# A report or cell file from a job that is not trusted: its size and nesting are bounded before anything
# walks it (a deeply nested document would exhaust the stack, a huge one the memory).
MAX_JSON_BYTES = 16 * 2**20
MAX_JSON_DEPTH = 64
# PyYAML parses about 0.5 MB a second: a matrix, a baseline or a rewrite catalog is a few KB.
MAX_YAML_BYTES = 2**20
MAX_SOURCE_BYTES = 16 * 2**20  # a model file `compatcheck fix` reads and rewrites
# What a path that is not a regular file is, for the one line that refuses it.
_KINDS = ((stat.S_ISDIR, "a directory"), (stat.S_ISFIFO, "a FIFO"), (stat.S_ISSOCK, "a socket"),
          (stat.S_ISCHR, "a character device"), (stat.S_ISBLK, "a block device"))


def not_regular(mode: int) -> str | None:
    """What a file of this st_mode is when it is not a regular file ('a FIFO'); None for a regular file."""
    if stat.S_ISREG(mode):
        return None
    return next((kind for test, kind in _KINDS if test(mode)), "not a regular file")


def read_bounded(path: Path, limit: int) -> bytes:
    """The bytes of the regular file `path`: ValueError saying what it is when it is not one (opened without
    blocking, so a FIFO is refused, never waited on) or when it is larger than `limit`; OSError when it
    cannot be opened."""
    fd = os.open(path, os.O_RDONLY | os.O_NONBLOCK)
    try:
        kind = not_regular(os.fstat(fd).st_mode)
        if kind:
            raise ValueError(f"it is {kind}, not a regular file")
        with os.fdopen(os.dup(fd), "rb") as f:
            data = f.read(limit + 1)  # one byte more tells a file over the limit from one at it
    finally:
        os.close(fd)
    if len(data) > limit:
        raise ValueError(f"it is larger than {limit // 2**20} MB, the limit")
    return data


def read_yaml_text(path: Path) -> str:
    """The text of a YAML file, within MAX_YAML_BYTES (read_bounded); ValueError where it is not UTF-8."""
    data = read_bounded(path, MAX_YAML_BYTES)
    try:
        return data.decode()
    except UnicodeDecodeError as exc:
        raise ValueError(f"it is not UTF-8 text (byte {exc.start})") from None


def write_atomically(path: Path, text: str, *, mode: int | None = None, encoding: str | None = None) -> None:
    """Write via a temporary file in the same folder and rename, so no reader sees half a file; with `mode`,
    the new file has it. The rename replaces the name: a link put there is replaced, never followed."""
    path = Path(path)
    fd, tmp = tempfile.mkstemp(prefix=f".{path.name}.", dir=path.parent or ".")
    try:
        with os.fdopen(fd, "w", encoding=encoding) as f:
            f.write(text)
        if mode is not None:
            os.chmod(tmp, mode)
        os.replace(tmp, path)
    except BaseException:
        Path(tmp).unlink(missing_ok=True)
        raise


def real_folder(base: Path, parts: tuple[str, ...], mode: int = 0o777) -> Path:
    """base/parts..., each part created or already a folder: ValueError where one is a link or a file, which
    would lead a write elsewhere."""
    path = Path(base)
    for part in parts:
        path = path / part
        try:
            os.mkdir(path, mode)
        except FileExistsError:
            pass
        if not stat.S_ISDIR(os.lstat(path).st_mode):
            raise ValueError(f"{path} is not a folder but a link or a file")
    return path


def copy_into(source: Path, folder: Path, name: str, *, expect: str | None = None,
              check: Callable[[os.stat_result], str | None] | None = None) -> str:
    """Copy `source` (a regular file, not a link) to folder/name and return the sha256 of the bytes copied.

    Nothing on the way is followed: the folders below `folder` must be real ones, the bytes go to a fresh
    temporary name (created exclusively, so a link planted there is never opened) that is renamed over the
    target (a rename replaces a link, it never writes through it). `check` sees the source's stat and
    returns why it must not be copied; with `expect`, bytes of another hash are refused. A refusal is a
    ValueError, a failed write an OSError; neither leaves a file behind."""
    target = Path(name)
    into = real_folder(Path(folder), target.parent.parts)
    try:
        fd = os.open(source, os.O_RDONLY | os.O_NOFOLLOW | os.O_NONBLOCK)  # a FIFO must not block us
    except OSError as exc:
        if exc.errno == errno.ELOOP:
            raise ValueError(f"{source} is a symbolic link") from None
        raise
    try:
        info = os.fstat(fd)
        if not stat.S_ISREG(info.st_mode):
            raise ValueError(f"{source} is not a regular file")
        reason = check(info) if check else None
        if reason:
            raise ValueError(f"{source} {reason}")
        out, partial = tempfile.mkstemp(prefix=f".{target.name}.", suffix=".partial", dir=into)
        try:
            digest = hashlib.sha256()
            with os.fdopen(out, "wb") as written:
                while chunk := os.read(fd, 1 << 20):
                    digest.update(chunk)
                    written.write(chunk)
                os.fchmod(written.fileno(), info.st_mode & 0o777)
            if expect is not None and digest.hexdigest() != expect:
                raise ValueError(f"{source} does not hold the bytes it was stored with")
            os.replace(partial, into / target.name)
        except BaseException:
            Path(partial).unlink(missing_ok=True)
            raise
    finally:
        os.close(fd)
    return digest.hexdigest()


def _depth(value) -> int:
    """How deeply lists and objects nest in a parsed JSON value, counted without recursion, stopping early."""
    deepest, todo = 0, [(value, 1)]
    while todo and deepest <= MAX_JSON_DEPTH:
        item, depth = todo.pop()
        if isinstance(item, (dict, list)):
            deepest = max(deepest, depth)
            todo.extend((child, depth + 1) for child in (item.values() if isinstance(item, dict) else item))
    return deepest


def read_json(path: Path):
    """The JSON document in `path`: OSError when it cannot be read, ValueError saying why when it is not
    a regular file, not JSON, over MAX_JSON_BYTES or nests deeper than MAX_JSON_DEPTH."""
    data = read_bounded(path, MAX_JSON_BYTES)
    too_deep = ValueError(f"it nests deeper than {MAX_JSON_DEPTH} levels")
    try:
        value = json.loads(data)
    except RecursionError:
        raise too_deep from None
    if _depth(value) > MAX_JSON_DEPTH:
        raise too_deep
    return value
