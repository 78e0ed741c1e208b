"""`compatcheck fix --write`: the offered rewrite into the model file, in place, and only into the file the
run read: never through a link, never over a file changed since."""

from __future__ import annotations

import os
from pathlib import Path

from compatcheck.errors import UsageError
from compatcheck.files import read_bounded, write_atomically


def write_rewrite(model: Path, read: bytes, text: str) -> None:
    """Replace the model file, which held `read` when the run started, by `text`; its mode is kept. A
    UsageError says why nothing was written."""
    given = Path(os.path.abspath(model))
    if os.path.realpath(given) != str(given):
        raise UsageError(f"--write: {model} is reached through a link; nothing was written")
    try:
        now = read_bounded(given, len(read) + 1)
    except ValueError:
        now = None
    if now != read:
        raise UsageError(f"--write: {model} changed since the run read it; nothing was written (run fix again)")
    write_atomically(given, text, mode=os.stat(given).st_mode & 0o7777, encoding="utf-8")
