"""A loop that carries state from one step to the next (`acc = decay * acc + h[:, t]`) has no batched
form: applying the body to the whole dimension at once, or torch.vmap, would compute something else.
Such a loop is told apart from one whose steps are independent (each writes its own slot, or appends to
a list), so that only the independent one is offered the batching rewrite."""

from __future__ import annotations

import ast
import linecache

CARRIED = "for-carried"  # the finding's op for a loop whose steps read what an earlier step wrote


def carried_names(file: str | None, line: int | None) -> list[str]:
    """The names the `for` loop starting at file:line reads in a step before that step assigns them, and
    assigns later in the step: each step reads what the one before wrote. [] for a loop of independent
    steps (each writes its own slot, or appends to a list), or where the loop cannot be read."""
    loop = _loop_at(file, line)
    if loop is None:
        return []
    exposed: list[str] = []  # read before this step wrote them: the value comes from outside or the step before
    written: set[str] = set()
    for statement in loop.body:
        read = {node.id for node in ast.walk(statement) if isinstance(node, ast.Name) and isinstance(node.ctx, ast.Load)}
        if isinstance(statement, ast.AugAssign) and isinstance(statement.target, ast.Name):
            read.add(statement.target.id)
        exposed += sorted(read - written - set(exposed))
        written |= {node.id for node in ast.walk(statement) if isinstance(node, ast.Name)
                    and isinstance(node.ctx, ast.Store)}  # `out[:, t] = ...` writes a slot, not the name
    loop_vars = {node.id for node in ast.walk(loop.target) if isinstance(node, ast.Name)}
    return [name for name in exposed if name in written and name not in loop_vars]


def _loop_at(file: str | None, line: int | None) -> ast.For | None:
    source = "".join(linecache.getlines(file)) if file else ""
    try:
        tree = ast.parse(source)
    except (SyntaxError, ValueError):
        return None
    return next((node for node in ast.walk(tree) if isinstance(node, ast.For) and node.lineno == line), None)
