"""Errors the user caused (bad model file, bad option): shown as one line, exit code 2; compatcheck's
own (an internal error): one line and exit code 3; and how any exception is worded on one line in a
report."""

import re
from collections.abc import Iterator

from compatcheck.causes import cause_first


class UsageError(Exception):
    """A problem with the command line or the model file, reported without a traceback."""


class InternalError(Exception):
    """compatcheck's own code raised: a bug of compatcheck, not the model's fault. `traceback` is where
    it was raised, for the bug report."""

    def __init__(self, message: str, traceback: str = ""):
        super().__init__(message)
        self.traceback = traceback


_ANSI = re.compile(r"\x1b\[[0-9;]*m")
# Where one sentence ends and the next begins: not after "e.g." or "i.e.", nor inside a number.
_SENTENCE_END = re.compile(r"(?<![.\s][a-z]\.)(?<=[.!?])\s+(?=[A-Z`(\"'])")
# A Python traceback printed into a message (torch's serializer, worker errors): its header, its indented
# frames and what joins chained ones, up to the exception's own line, which is kept.
_TRACEBACK = re.compile(r"Traceback \(most recent call last\):[ \t]*\n(?:[ \t]+.*\n|[ \t]*\n)*")
_CHAINED = re.compile(r"^(?:The above exception was the direct cause of the following exception:|"
                      r"During handling of the above exception, another exception occurred:)[ \t]*$", re.M)


def _whole_sentences(text: str, limit: int) -> str:
    """As many whole sentences of `text` as fit in `limit`; the first one cut with "…" if none does."""
    kept = ""
    for sentence in _SENTENCE_END.split(text):
        candidate = f"{kept} {sentence}".strip()
        if len(candidate) > limit:
            break
        kept = candidate
    return kept or cut(text, limit)


def cut(text: str, limit: int) -> str:
    """`text` in at most `limit` characters: whole words and " …" where a word ends in its second half, else
    cut at the limit with "…"."""
    if len(text) <= limit:
        return text
    space = text.rfind(" ", 0, limit - 1)
    return text[:space].rstrip() + " …" if space > limit // 2 else text[:limit - 1] + "…"


def one_line(exc: BaseException, limit: int = 240) -> str:
    """The exception's type and the start of its message, in whole sentences, on one line. A traceback
    the message embeds leaves only its exceptions' lines: its frames are library paths, not the cause."""
    text = _CHAINED.sub("", _TRACEBACK.sub("", _ANSI.sub("", str(exc)) + "\n")).strip()
    lines = cause_first([line.strip() for line in text.splitlines() if line.strip()])
    head = f"{type(exc).__name__}: " if lines else type(exc).__name__
    first = " ".join(lines[:3])
    if len(lines) > 3 or len(head + first) > limit:
        first = _whole_sentences(" ".join(lines), limit - len(head))
    return head + first


def chain(error: BaseException | None, *, contexts: bool = True) -> Iterator[BaseException]:
    """The error and each exception behind it, each once (a chain can loop: `raise exc from exc`): what
    it was raised from (`__cause__`); with `contexts`, else what it was raised while handling
    (`__context__`) or what it wraps (inductor's `inner_exception`). The one walk of a cause chain."""
    seen = set()
    while error is not None and id(error) not in seen:
        seen.add(id(error))
        yield error
        error = error.__cause__ or ((error.__context__ or getattr(error, "inner_exception", None)) if contexts
                                    else None)


def restated(restatement: BaseException, error: BaseException) -> BaseException:
    """What to raise for `error`: its restatement caused by it, or `error` itself as it was. Never chained
    to itself, which would lose the cause it had and make its cause chain loop."""
    if restatement is not error:
        restatement.__cause__ = error
    return restatement


def chain_text(error: BaseException | None) -> str:
    """Every message along an exception's causes and contexts: exporters restate errors and chain the real one."""
    return "\n".join(str(one) for one in chain(error))
