"""Name the Python construct a line of user code relies on, for findings whose evidence is a line
rather than an op: a frozen branch, a data-dependent guard, a value that left the graph."""

from __future__ import annotations

import re

# First match wins: a line like `if x.item() > 0:` is about the branch, not the scalar.
_PATTERNS = (
    (re.compile(r"^\s*(el)?if\b"), "if"),
    (re.compile(r"^\s*while\b"), "while"),
    (re.compile(r"^\s*for\b"), "for"),
    (re.compile(r"^\s*assert\b"), "assert"),
    (re.compile(r"\.item\(\)"), "Tensor.item"),
    (re.compile(r"\.tolist\(\)"), "Tensor.tolist"),
    (re.compile(r"\.numpy\(\)"), "Tensor.numpy"),
    (re.compile(r"\bfrom_numpy\("), "torch.from_numpy"),
    (re.compile(r"\b(np|numpy)\.\w"), "numpy"),
    (re.compile(r"\bfloat\("), "float()"),
    (re.compile(r"\bint\("), "int()"),
    (re.compile(r"\bbool\("), "bool()"),
    (re.compile(r"\bif\b.*\belse\b"), "if"),
)


def construct(code: str | None) -> str | None:
    """The construct on this source line that turns a tensor into a Python value, if one is visible."""
    for pattern, name in _PATTERNS:
        if code and pattern.search(code):
            return name
    return None
