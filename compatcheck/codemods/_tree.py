"""What the codemods share: finding the statement or function at a line, and whether a name is imported."""

from __future__ import annotations

import libcst
from libcst.metadata import MetadataWrapper, PositionProvider


def _positions(module: libcst.Module) -> tuple[MetadataWrapper, dict]:
    """The wrapper whose module edits go through, and where each of its nodes is."""
    wrapper = MetadataWrapper(module)
    return wrapper, wrapper.resolve(PositionProvider)


def at_line(module: libcst.Module, line: int, kinds: tuple[type, ...]) -> tuple[MetadataWrapper, list]:
    """The nodes of `kinds` whose code starts at `line`, outermost first, with the wrapper whose module
    they belong to (edits go through that module)."""
    wrapper, positions = _positions(module)
    return wrapper, [node for node, where in positions.items() if isinstance(node, kinds) and where.start.line == line]


def enclosing(module: libcst.Module, line: int, kind: type) -> tuple[MetadataWrapper, object | None]:
    """The innermost node of `kind` whose code spans `line`, with the wrapper it belongs to."""
    wrapper, positions = _positions(module)
    spans = [(where.start.line, node) for node, where in positions.items()
             if isinstance(node, kind) and where.start.line <= line <= where.end.line]
    return wrapper, max(spans, key=lambda pair: pair[0])[1] if spans else None


def imported_as(module: libcst.Module, package: str) -> set[str]:
    """The names a top-level `import package` or `import package as name` binds in the file: what the code
    we write may call the package by."""
    names = set()
    for statement in module.body:
        for small in statement.body if isinstance(statement, libcst.SimpleStatementLine) else ():
            if isinstance(small, libcst.Import):
                names |= {alias.asname.name.value if alias.asname else package for alias in small.names
                          if dotted(alias.name) == package}
    return names


def dotted(node) -> str | None:
    """'np.clip' for the expression np.clip, None for anything but names joined by dots."""
    if isinstance(node, libcst.Name):
        return node.value
    if isinstance(node, libcst.Attribute):
        head = dotted(node.value)
        return f"{head}.{node.attr.value}" if head else None
    return None
