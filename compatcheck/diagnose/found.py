"""A finding at the user's line: the one place that makes a Finding from where something happened.

Every finding compatcheck reports is made in diagnose/ (a syntax-tree test holds the package to it):
stages build and run, the harness orchestrates, this layer says what was found and where.
"""

from __future__ import annotations

from compatcheck.frames import UserCode, library_path, source_line
from compatcheck.report.model import Finding


def finding_at(user: UserCode, stage: str, kind: str, message: str, *, location=None, op=None, rewrite=None,
               stack=None) -> Finding:
    """A finding pointing at `location` (a FrameSummary or a (file, line) pair), by default the
    innermost user frame of `stack`; a library frame below it in `stack` is recorded too."""
    file, line = user.location(location, stack)
    finding = Finding(stage=stage, kind=kind, op=op, file=user.display(file), line=line,
                      code=source_line(file, line), message=message, rewrite=rewrite)
    library = user.library_frame(stack) if stack is not None else None
    if library is not None:
        finding.library_file = library_path(library[0], user.packages)
        finding.library_line = library[1]
        finding.library_code = source_line(*library)
    return finding


def plain(stage: str, kind: str, message: str, **fields) -> Finding:
    """A finding that points at no line: a server's error, a proven recipe, the environment."""
    return Finding(stage=stage, kind=kind, message=message, **fields)
