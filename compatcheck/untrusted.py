"""Text the model controls (its messages, its file name, its outputs' names), made inert wherever it is shown.

A model's exception can carry escape sequences that clear a terminal and paint "all stages pass",
a line starting with `::` that a GitHub runner takes as a workflow command, characters XML 1.0
forbids (one makes CI drop the whole JUnit file), lone surrogates that no UTF-8 stream can encode,
and the bidirectional overrides that make text read otherwise than it is. `clean` shows each of them
as a visible escape (`\\x1b`, `\\u202e`) and puts a backslash before a `::` that starts a line; the
terminal, annotations, JUnit and Markdown renderers pass such text through it. compatcheck's own
styling is added around the cleaned text, so its colours are untouched.
"""

from __future__ import annotations

import re

# C0 controls but tab and newline, DEL and C1, lone surrogates, the bidi embeddings, overrides, isolates
# and marks, the line and paragraph separators, and the two code points XML 1.0 forbids outside them.
_ACTIVE = re.compile("[\x00-\x08\x0b-\x1f\x7f-\x9f\ud800-\udfff\u061c\u200e\u200f\u2028\u2029"
                     "\u202a-\u202e\u2066-\u2069\ufffe\uffff]")
_COMMAND = re.compile(r"(?m)^(\s*)::")  # a GitHub workflow command must start its line
_SURROGATE = re.compile("[\ud800-\udfff]")


def _escape(match: re.Match) -> str:
    code = ord(match.group())
    return f"\\x{code:02x}" if code < 0x100 else f"\\u{code:04x}"


def clean(text: str | None, *, lines: bool = False) -> str:
    """`text` with nothing left that acts on a terminal, a CI runner, an XML or a Markdown reader; on one
    line (tabs and newlines as spaces) unless `lines`."""
    text = _ACTIVE.sub(_escape, text or "")
    if not lines:
        text = text.replace("\t", " ").replace("\n", " ")
    return _COMMAND.sub(r"\1\\::", text)


def encodable(value):
    """A JSON-like structure with every lone surrogate replaced by U+FFFD: what a model's message may hold
    and no UTF-8 report can."""
    if isinstance(value, str):
        return _SURROGATE.sub("\ufffd", value)
    if isinstance(value, dict):
        return {encodable(k): encodable(v) for k, v in value.items()}
    if isinstance(value, (list, tuple)):
        return [encodable(v) for v in value]
    return value
