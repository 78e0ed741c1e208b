"""A stage that failed because the worker's sandbox refused a new entry beside compatcheck's cache or key
folder. Landlock only grants, so in the folders on the way to those two the worker may use what was
there when it started and make nothing new (session/sandbox.py): a model, or a library making its own
cache folder (~/.triton, ~/.cache/torch), gets `Permission denied` that is the sandbox's, not its own.
"""

from __future__ import annotations

import os
import re
import shlex

from compatcheck.diagnose.errors import error_stack, locate
from compatcheck.diagnose.found import finding_at
from compatcheck.errors import chain
from compatcheck.protocol import SandboxFolders
from compatcheck.report.model import Finding

_QUOTED = re.compile(r"""'(/[^'\n]+)'|"(/[^"\n]+)\"""")  # an absolute path in a message, quoted as OSError does


def _paths(error: PermissionError) -> list[str]:
    """The paths a refused call named: its file names, then those quoted in its message."""
    named = [os.fsdecode(name) for name in (error.filename, error.filename2) if isinstance(name, (str, bytes))]
    quoted = [single or double for single, double in _QUOTED.findall(str(error))]
    return list(dict.fromkeys(named + quoted))


def refused_entry(folders: SandboxFolders, error: BaseException | None) -> str | None:
    """The new entry directly in a folder the sandbox keeps unchanged that `error`, or one behind it, was
    refused, else None. An entry that exists now was there before (the worker cannot have made it): its
    refusal is not the sandbox's doing."""
    refusing, protected = set(folders.refusing), set(folders.protected)
    if not refusing:  # no sandbox
        return None
    for found in chain(error):
        if not isinstance(found, PermissionError):  # EACCES and EPERM
            continue
        for path in _paths(found):
            path = os.path.abspath(path)
            parent = os.path.realpath(os.path.dirname(path))
            entry = os.path.join(parent, os.path.basename(path))
            if parent in refusing and entry not in refusing | protected and not os.path.lexists(entry):
                return entry
    return None


def sandbox_findings(stage: str, ctx, errors: list[BaseException | None]) -> list[Finding]:
    """The finding for the first of `errors` (what the stage raised) that the sandbox caused, if any."""
    for error in errors:
        entry = refused_entry(ctx.sandbox, error)
        if entry is None:
            continue
        quoted = shlex.quote(entry)
        message = (f"compatcheck's sandbox refused to create {entry}: {os.path.dirname(entry)} is on the way to "
                   "its result cache or its key, and the model can make nothing new there during a run; create it "
                   f"before the run (`mkdir -p {quoted}` for a folder, `touch {quoted}` for a file) or run with "
                   "COMPATCHECK_SANDBOX=off (docs: Isolation and safety)")
        return [finding_at(ctx.spec.user, stage, "sandbox-denied", message, location=locate(ctx, error),
                           stack=error_stack(ctx, error))]
    return []
