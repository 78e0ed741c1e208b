"""Map stack frames to the user's model file, skipping torch and compatcheck internals."""

from __future__ import annotations

import linecache
import re
import traceback
from pathlib import Path

from compatcheck.report.model import Finding

_PACKAGE_DIR = Path(__file__).resolve().parent
_TRACED_FRAME = re.compile(r"^(.+\.py)\((\d+)\): \S+$")


class UserCode:
    """Knows which files are the user's: the model file, and files beside it."""

    def __init__(self, model_file: Path):
        self.model_file = Path(model_file).resolve()
        self.root = self.model_file.parent

    def owns(self, filename: str | None) -> bool:
        if not filename or filename.startswith("<"):
            return False
        path = Path(filename).resolve()
        if "site-packages" in path.parts or "dist-packages" in path.parts or _PACKAGE_DIR in path.parents:
            return False
        return path == self.model_file or self.root in path.parents

    def innermost(self, frames: list[traceback.FrameSummary]) -> traceback.FrameSummary | None:
        """The innermost frame in the user's code; frames are outermost first, as traceback gives them."""
        for frame in reversed(frames):
            if self.owns(frame.filename):
                return frame
        return None

    def from_exception(self, exc: BaseException) -> traceback.FrameSummary | None:
        """The innermost user frame of an exception, following its cause and context chain."""
        seen = set()
        while exc is not None and id(exc) not in seen:
            seen.add(id(exc))
            frame = self.innermost(traceback.extract_tb(exc.__traceback__))
            if frame is not None:
                return frame
            exc = exc.__cause__ or exc.__context__
        return None

    def locations(self, text: str | None) -> list[tuple[str, int]]:
        """Every user location in printed text, in text order: Python stacks and TorchScript source
        ranges ('File "x.py", line 12'), and the tracer's stacks ('x.py(12): forward')."""
        found = []
        for line in (text or "").splitlines():
            line = line.strip()
            traced = _TRACED_FRAME.match(line)
            if traced:
                name, number = traced.group(1), traced.group(2)
            elif line.startswith('File "'):
                name, _, rest = line[len('File "'):].partition('"')
                rest = rest.strip().lstrip(",").strip()
                number = rest[len("line "):].split(",")[0].strip() if rest.startswith("line ") else ""
            else:
                continue
            if number.isdigit() and self.owns(name):
                found.append((name, int(number)))
        return found

    def from_stack_text(self, text: str | None) -> tuple[str, int] | None:
        """The innermost user location in a printed Python stack (outermost first), as FX nodes keep."""
        found = self.locations(text)
        return found[-1] if found else None

    def finding(self, stage: str, kind: str, message: str, *, location=None, op=None, rewrite=None) -> Finding:
        """A finding pointing at `location`: a FrameSummary or a (file, line) pair, or nothing."""
        file = line = None
        if isinstance(location, traceback.FrameSummary):
            file, line = location.filename, location.lineno
        elif location:
            file, line = location
        code = linecache.getline(file, line).strip() or None if file and line else None
        return Finding(
            stage=stage, kind=kind, op=op, file=self.display(file), line=line, code=code,
            message=message, rewrite=rewrite,
        )

    def display(self, file: str | None) -> str | None:
        """The file as the user named it: relative to the model's folder when inside it."""
        if not file:
            return None
        path = Path(file).resolve()
        try:
            return str(path.relative_to(self.root))
        except ValueError:
            return str(path)
