"""`int(x.size(d))`, `int(x.shape[d])`, `int(x.size()[d])`: the size itself. It is an int already in eager
and a symbolic size under export and tracing, where int() makes it the example's number."""

from __future__ import annotations

import libcst
import libcst.matchers as m

from compatcheck.codemods._tree import at_line

_DIM = m.Integer() | m.UnaryOperation(operator=m.Minus(), expression=m.Integer())
_SIZE = (m.Call(func=m.Attribute(attr=m.Name("size")), args=[m.Arg(value=_DIM, keyword=None, star="")])
         | m.Subscript(value=m.Attribute(attr=m.Name("shape")) | m.Call(func=m.Attribute(attr=m.Name("size")), args=[]),
                       slice=[m.SubscriptElement(slice=m.Index(value=_DIM))]))
_INT_OF_SIZE = m.Call(func=m.Name("int"), args=[m.Arg(value=_SIZE, keyword=None, star="")])


class _Unwrap(libcst.CSTTransformer):
    def __init__(self, calls: list):
        self.calls = calls

    def leave_Call(self, original, updated):
        if any(original is call for call in self.calls):
            return updated.args[0].value.with_changes(lpar=updated.lpar, rpar=updated.rpar)
        return updated


def rewrite(module: libcst.Module, line: int) -> libcst.Module | None:
    wrapper, calls = at_line(module, line, (libcst.Call,))
    calls = [call for call in calls if m.matches(call, _INT_OF_SIZE)]
    return wrapper.module.visit(_Unwrap(calls)) if calls else None
