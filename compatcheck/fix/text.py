"""A rewrite as text: its unified diff, the statements of the original it changes, and several rewrites of
one file made into one."""

from __future__ import annotations

import ast
import difflib


def unified(source: str, text: str, shown: str) -> str:
    """The diff from `source` to `text`, as `patch -p0` and `git apply -p0` take it from where `shown` is."""
    return "".join(difflib.unified_diff(source.splitlines(keepends=True), text.splitlines(keepends=True),
                                        fromfile=shown, tofile=shown))


def _changes(source: str, text: str) -> list[tuple[int, int, int, int]]:
    """The (i1, i2, j1, j2) of every span of lines that differs, 0-based, end excluded."""
    matcher = difflib.SequenceMatcher(None, source.splitlines(keepends=True), text.splitlines(keepends=True),
                                      autojunk=False)
    return [(i1, i2, j1, j2) for tag, i1, i2, j1, j2 in matcher.get_opcodes() if tag != "equal"]


def changed_statements(source: str, text: str) -> list[int]:
    """The first line of each statement of `source` that the rewrite changes: the lines a run must have
    executed for the rewrite to be proven by it."""
    statements = [node for node in ast.walk(ast.parse(source)) if isinstance(node, ast.stmt)]
    lines = set()
    for i1, i2, _, _ in _changes(source, text):
        for line in range(i1 + 1, i2 + 1):
            holding = [node for node in statements if node.lineno <= line <= (node.end_lineno or node.lineno)]
            if holding:  # the innermost: the one that starts last
                lines.add(max(node.lineno for node in holding))
    return sorted(lines)


def combined(source: str, texts: list[str]) -> str | None:
    """One file with every rewrite of `source` in `texts` made; None where two change the same lines."""
    spans = sorted((change, text) for text in texts for change in _changes(source, text))
    for (first, _), (second, _) in zip(spans, spans[1:]):
        if second[0] < first[1] or second[0] == first[0]:
            return None
    old, out, at = source.splitlines(keepends=True), [], 0
    for (i1, i2, j1, j2), text in spans:
        out += old[at:i1] + text.splitlines(keepends=True)[j1:j2]
        at = i2
    return "".join(out + old[at:])
