"""Codemods: a catalog entry's rewrite made on the user's own source, where its pattern matches the code
at the finding's line exactly. Each edits a concrete syntax tree (libcst), so the rest of the file keeps
its formatting and comments; each returns None where the code is not the pattern it knows, and the
finding's rewrite then stays text. `compatcheck fix` runs the ladder on what they make before offering it.

A codemod is a function (module, line) -> module | None on a libcst Module; this table names them for the
catalog's `codemod:` field."""

from __future__ import annotations

import importlib

# name -> the module that defines `rewrite(module, line)`, and what it rewrites
CODEMODS = {
    "numpy-to-torch": ("compatcheck.codemods.numpy_to_torch",
                       "a numpy round trip in a function: the torch functions on the tensor itself"),
    "size-without-int": ("compatcheck.codemods.size_without_int",
                         "int() of a tensor's size: the size itself, which stays symbolic"),
    "if-to-where": ("compatcheck.codemods.if_to_where",
                    "an `if` on a tensor's value choosing between two tensors: torch.where over both"),
}


def rewrite(name: str, source: str, line: int) -> str | None:
    """`source` (a whole Python file) with codemod `name` applied at `line`; None where it does not fit,
    where the file does not parse, or where it changes nothing."""
    import libcst

    try:
        module = libcst.parse_module(source)
    except libcst.ParserSyntaxError:
        return None
    changed = importlib.import_module(CODEMODS[name][0]).rewrite(module, line)
    if changed is None or changed.code == source:
        return None
    return changed.code
