"""How deeply a model's inputs or outputs nest, measured without recursion, and the refusal past a limit.

torch's pytree, and the comparison built on it, walk a structure by recursion, two frames a level: a
list nested a thousand deep exhausts Python's stack and would read as the model's own RecursionError.
No model's inputs or outputs nest anywhere near MAX_NESTING, so deeper ones are refused up front.
"""

from __future__ import annotations

import dataclasses

from torch.utils import _pytree as pytree

from compatcheck.errors import UsageError

MAX_NESTING = 100
_COUNTED = 100_000  # levels counted at most: a list that holds itself nests without end


def _children(node) -> list | None:
    """What pytree (or the comparison, for a dataclass: compare.py) opens `node` into; None for a leaf."""
    if dataclasses.is_dataclass(node) and not isinstance(node, type):
        return [getattr(node, field.name) for field in dataclasses.fields(node)]
    if pytree.tree_is_leaf(node):
        return None
    asked = []

    def below(item) -> bool:  # the node itself is opened, whatever it holds is not: one level only
        asked.append(item)
        return len(asked) > 1

    return pytree.tree_flatten(node, is_leaf=below)[0]


def depth(tree) -> int:
    """How many containers deep `tree` nests (a tensor 0, [tensor] 1), counted up to _COUNTED + 1."""
    deepest, todo = 0, [(tree, 0)]
    while todo and deepest <= _COUNTED:
        node, level = todo.pop()
        children = _children(node)
        if children is not None:
            deepest = max(deepest, level + 1)
            todo.extend((child, level + 1) for child in children)
    return deepest


def refuse_deep(tree, what: str) -> None:
    """A UsageError when `tree` nests deeper than MAX_NESTING, naming `what` ('forward()'s output for input
    set 1'), how deep it goes and the limit."""
    found = depth(tree)
    if found > MAX_NESTING:
        deep = f"{found} levels" if found <= _COUNTED else f"more than {_COUNTED} levels"
        raise UsageError(f"{what} nests {deep} deep (containers inside containers); compatcheck walks at most "
                         f"{MAX_NESTING} levels")
