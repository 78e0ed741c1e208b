"""Map stack frames to the user's model file, skipping torch and compatcheck internals, and find the
library frame (transformers, timm, torchvision, ...) where something happened below the user's line."""

from __future__ import annotations

import linecache
import re
import traceback
from pathlib import Path

from compatcheck.report.model import Finding

_PACKAGE_DIR = Path(__file__).resolve().parent
_TRACED_FRAME = re.compile(r"^(.+\.py)\((\d+)\): \S+$")
# Installed packages whose frames are the machinery under every model, not the library it is built with.
_NOT_A_LIBRARY = {"torch", "functorch", "compatcheck", "onnx", "onnxscript", "onnxruntime", "numpy", "sympy"}


def library_path(filename: str | None) -> str | None:
    """'transformers/models/llama/modeling_llama.py' for a file of an installed third-party library."""
    if not filename or filename.startswith("<"):
        return None
    parts = Path(filename).parts
    for marker in ("site-packages", "dist-packages"):
        if marker in parts:
            rest = parts[len(parts) - 1 - parts[::-1].index(marker) + 1:]
            if len(rest) > 1 and rest[0] not in _NOT_A_LIBRARY:
                return "/".join(rest)
    return None


def _pairs(stack) -> list[tuple[str, int]]:
    """(file, line) per frame, outermost first, from FrameSummaries or a printed Python stack."""
    if stack is None:
        return []
    if isinstance(stack, str):
        return _printed_locations(stack)
    return [(frame.filename, frame.lineno) for frame in stack if frame.lineno]


def _printed_locations(text: str) -> list[tuple[str, int]]:
    """Every location in printed text, in text order: Python stacks and TorchScript source ranges
    ('File "x.py", line 12'), and the tracer's stacks ('x.py(12): forward')."""
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
        if number.isdigit():
            found.append((name, int(number)))
    return found


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
        """Every user location in printed text, in text order."""
        return [(name, number) for name, number in _printed_locations(text or "") if self.owns(name)]

    @staticmethod
    def printed_locations(text: str | None) -> list[tuple[str, int]]:
        """Every location in printed text, the user's or not, in text order."""
        return _printed_locations(text or "")

    def library_frame(self, stack) -> tuple[str, int] | None:
        """The innermost library frame below the user's innermost one (or anywhere, when the stack
        never passes through the user's code); `stack` is FrameSummaries or a printed stack."""
        pairs = _pairs(stack)
        user = max((i for i, (name, _) in enumerate(pairs) if self.owns(name)), default=-1)
        return next(((name, line) for name, line in reversed(pairs[user + 1:]) if library_path(name)), None)

    def exception_stack(self, exc: BaseException) -> list[traceback.FrameSummary]:
        """The traceback of the exception in the cause/context chain that passes through the user's code,
        else of the innermost one: the stack the error happened in."""
        seen, last = set(), []
        while exc is not None and id(exc) not in seen:
            seen.add(id(exc))
            last = traceback.extract_tb(exc.__traceback__)
            if self.innermost(last) is not None:
                return last
            exc = exc.__cause__ or exc.__context__
        return last

    def from_stack_text(self, text: str | None) -> tuple[str, int] | None:
        """The innermost user location in a printed Python stack (outermost first), as FX nodes keep."""
        found = self.locations(text)
        return found[-1] if found else None

    def finding(self, stage: str, kind: str, message: str, *, location=None, op=None, rewrite=None,
                stack=None) -> Finding:
        """A finding pointing at `location` (a FrameSummary or a (file, line) pair), by default the
        innermost user frame of `stack`; a library frame below it in `stack` is recorded too."""
        if location is None and stack is not None:
            pairs = [pair for pair in _pairs(stack) if self.owns(pair[0])]
            location = pairs[-1] if pairs else None
        file = line = None
        if isinstance(location, traceback.FrameSummary):
            file, line = location.filename, location.lineno
        elif location:
            file, line = location
        finding = Finding(
            stage=stage, kind=kind, op=op, file=self.display(file), line=line, code=_source(file, line),
            message=message, rewrite=rewrite,
        )
        library = self.library_frame(stack) if stack is not None else None
        if library is not None:
            finding.library_file = library_path(library[0])
            finding.library_line = library[1]
            finding.library_code = _source(*library)
        return finding

    def display(self, file: str | None) -> str | None:
        """The file as the user named it: relative to the model's folder when inside it."""
        if not file:
            return None
        path = Path(file).resolve()
        try:
            return str(path.relative_to(self.root))
        except ValueError:
            return str(path)


def _source(file: str | None, line: int | None) -> str | None:
    return linecache.getline(file, line).strip() or None if file and line else None
