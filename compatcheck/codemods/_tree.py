"""What the codemods share: finding the statement or function at a line, and whether a name is imported."""

from __future__ import annotations

import libcst
from libcst.metadata import MetadataWrapper, PositionProvider


def at_line(module: libcst.Module, line: int, kinds: tuple[type, ...]) -> tuple[MetadataWrapper, list]:
    """The nodes of `kinds` whose code starts at `line`, outermost first, with the wrapper whose module
    they belong to (edits go through that module)."""
    wrapper = MetadataWrapper(module)
    positions = wrapper.resolve(PositionProvider)
    found = [node for node, where in positions.items() if isinstance(node, kinds) and where.start.line == line]
    return wrapper, found


def enclosing(module: libcst.Module, line: int, kind: type) -> tuple[MetadataWrapper, object | None]:
    """The innermost node of `kind` whose code spans `line`, with the wrapper it belongs to."""
    wrapper = MetadataWrapper(module)
    positions = wrapper.resolve(PositionProvider)
    spans = [(where.start.line, node) for node, where in positions.items()
             if isinstance(node, kind) and where.start.line <= line <= where.end.line]
    return wrapper, max(spans, key=lambda pair: pair[0])[1] if spans else None


def imports_module(module: libcst.Module, name: str) -> bool:
    """Whether the file does `import name` at its top level, so the name can be used in what we write."""
    for statement in module.body:
        for small in statement.body if isinstance(statement, libcst.SimpleStatementLine) else ():
            if isinstance(small, libcst.Import) and any(
                    alias.asname is None and isinstance(alias.name, libcst.Name) and alias.name.value == name
                    for alias in small.names):
                return True
    return False


def dotted(node) -> str | None:
    """'np.clip' for the expression np.clip, None for anything but names joined by dots."""
    if isinstance(node, libcst.Name):
        return node.value
    if isinstance(node, libcst.Attribute):
        head = dotted(node.value)
        return f"{head}.{node.attr.value}" if head else None
    return None
