"""`if c: return a` then `else: return b` (or the `return b` right after the `if`), and `if c: v = a` then
`else: v = b`: one `torch.where(c, a, b)`. Both branches are computed then, for every element."""

from __future__ import annotations

import libcst

from compatcheck.codemods._tree import at_line, imported_as


def _single(block) -> libcst.BaseSmallStatement | None:
    """The one small statement a branch holds, else None."""
    if isinstance(block, libcst.SimpleStatementSuite):
        smalls = block.body
    elif len(block.body) == 1 and isinstance(block.body[0], libcst.SimpleStatementLine):
        smalls = block.body[0].body
    else:
        return None
    return smalls[0] if len(smalls) == 1 else None


def _where(test, taken, other) -> libcst.Call:
    return libcst.Call(libcst.parse_expression("torch.where"),
                       [libcst.Arg(test), libcst.Arg(taken), libcst.Arg(other)])


def _chosen(test, taken, other) -> libcst.BaseSmallStatement | None:
    """The statement both branches become: a return of, or an assignment of one name to, torch.where."""
    if None in (taken, other) or type(taken) is not type(other):
        return None
    if isinstance(taken, libcst.Return) and taken.value is not None and other.value is not None:
        return taken.with_changes(value=_where(test, taken.value, other.value))
    if isinstance(taken, libcst.Assign) and len(taken.targets) == len(other.targets) == 1:
        name, other_name = taken.targets[0].target, other.targets[0].target
        if isinstance(name, libcst.Name) and isinstance(other_name, libcst.Name) and name.value == other_name.value:
            return taken.with_changes(value=_where(test, taken.value, other.value))
    return None


class _Merge(libcst.CSTTransformer):
    def __init__(self, target: libcst.If):
        self.target, self.done = target, False

    def _merged(self, original: tuple, body: tuple) -> tuple | None:
        for index, statement in enumerate(body):
            if original[index] is not self.target:
                continue
            taken = _single(statement.body)
            if isinstance(statement.orelse, libcst.Else):
                other, drop = _single(statement.orelse.body), 1
            elif statement.orelse is None and index + 1 < len(body) and isinstance(taken, libcst.Return):
                following = body[index + 1]
                other = _single(libcst.IndentedBlock([following])) if isinstance(following, libcst.SimpleStatementLine) else None
                drop = 2
            else:
                return None
            merged = _chosen(statement.test, taken, other)
            if merged is None:
                return None
            line = libcst.SimpleStatementLine([merged], leading_lines=statement.leading_lines)
            self.done = True
            return (*body[:index], line, *body[index + drop:])
        return None

    def leave_IndentedBlock(self, original, updated):
        merged = self._merged(original.body, updated.body)
        return updated.with_changes(body=merged) if merged is not None else updated


def rewrite(module: libcst.Module, line: int) -> libcst.Module | None:
    if "torch" not in imported_as(module, "torch"):
        return None
    wrapper, found = at_line(module, line, (libcst.If,))
    if len(found) != 1:
        return None
    merge = _Merge(found[0])
    changed = wrapper.module.visit(merge)
    return changed if merge.done else None
