"""Outputs torch.export cannot carry as they are: a class pytree does not know (a dataclass, a library's
output object) and a namedtuple that torch.export.save cannot write. The finding points at the line of
forward that builds the output, with the registration that fits the type."""

from __future__ import annotations

import dataclasses
import inspect
import re

from compatcheck.compare import flatten
from compatcheck.errors import chain_text
from compatcheck.diagnose.found import finding_at

_UNKNOWN = re.compile(r"Found <class '([\w.]+)'> in output, which is not a known type")
_NAMEDTUPLE = re.compile(r"Can't serialize TreeSpec of namedtuple class <class '([\w.]+)'>")


def _output_object(ctx, qualified: str):
    """The object of the class of that name among eager's outputs (or inside them), or None."""
    name = qualified.rsplit(".", 1)[-1]

    def walk(value, depth=0):
        if type(value).__name__ == name:
            return value
        if depth > 4:
            return None
        children = (list(value.values()) if isinstance(value, dict) else list(value) if isinstance(value, (list, tuple))
                    else [getattr(value, f.name) for f in dataclasses.fields(value)] if dataclasses.is_dataclass(value)
                    else [])
        return next((found for child in children if (found := walk(child, depth + 1)) is not None), None)

    return next((found for output in ctx.reference if (found := walk(output)) is not None), None)


def _built_at(ctx, cls) -> tuple[str, int] | None:
    """The line of the model's forward that calls the class: where the output is made."""
    forward = type(ctx.spec.model).forward
    try:
        lines, start = inspect.getsourcelines(forward)
        file = inspect.getsourcefile(forward)
    except (OSError, TypeError):
        return None
    call = re.compile(rf"\b{re.escape(cls.__name__)}\s*\(")
    for offset, line in enumerate(lines):
        if call.search(line) and ctx.spec.user.owns(file):
            return file, start + offset
    return None


def output_type_findings(stage: str, ctx, error: BaseException | None) -> list:
    """A finding for an output type that torch.export or torch.export.save refused; [] for other errors."""
    text = chain_text(error)
    unknown, namedtuple = _UNKNOWN.search(text), _NAMEDTUPLE.search(text)
    match = unknown or namedtuple
    if match is None:
        return []
    instance = _output_object(ctx, match.group(1))
    cls = type(instance) if instance is not None else None
    name = cls.__name__ if cls else match.group(1).rsplit(".", 1)[-1]
    rewrite = None
    if namedtuple:
        message = (f"forward returns the namedtuple {name}: torch.export exports it, but torch.export.save cannot "
                   "write a program whose output is a namedtuple it was not told the name of; register it before "
                   "saving, or return a tuple or a dict")
        rewrite = (f"torch.utils._pytree._register_namedtuple({name}, serialized_type_name="
                   f"{f'{cls.__module__}.{name}' if cls else name!r})  # once, before torch.export.save")
    elif cls is not None and dataclasses.is_dataclass(cls):
        message = (f"forward returns the dataclass {name}, which torch.export does not know: register it, and "
                   "torch.export carries its fields")
        rewrite = f"torch.export.register_dataclass({name})  # once, before torch.export.export"
    else:
        held = [leaf_name for leaf_name, leaf in flatten(instance)[0] if hasattr(leaf, "shape")] if cls else []
        shown = f" (it holds {', '.join(held[:4])})" if held else ""
        message = (f"forward returns a {name}{shown}, a type torch.export does not know: register it as a pytree "
                   "node (torch.utils._pytree.register_pytree_node) so its tensors become outputs, or return its "
                   "tensors in a tuple or dict")
    return [finding_at(ctx.spec.user, stage, "unexportable-output", message, location=_built_at(ctx, cls) if cls else None,
                                  op=name, rewrite=rewrite)]

