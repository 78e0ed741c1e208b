"""When an export with the inferred Dim.DYNAMIC dims fails for a reason other than a specialization
(an exporter bug one spelling of the dims trips), export again with Dim.AUTO, which lets a dimension
become static instead of failing. Every input set is run through the result anyway, so a dimension
that silently specialized cannot pass unseen; the finding names the dims that came out static and
the line that pinned each. Only for dims compatcheck inferred, never the user's get_dynamic_shapes()."""

from __future__ import annotations

import logging
import re
from contextlib import contextmanager

from compatcheck.report.model import Finding

_SPECIALIZED = re.compile(r"specializ|Constraints violated|marked .* as dynamic|Not all values of", re.I)
_SOURCE = re.compile(r"\['(\w+)'\](?:\[\d+\])*\.size\(\)\[(\d+)\]|\[(\d+)\]\.size\(\)\[(\d+)\]")


def is_specialization(error: BaseException) -> bool:
    """Whether the export failed because a dimension declared dynamic had to be a constant."""
    from compatcheck.diagnose.shapes import pinned_dims

    if pinned_dims(error):  # "inferred a static shape of 2 for dimension ...", worded so by some releases
        return True
    while error is not None:
        if _SPECIALIZED.search(str(error)):
            return True
        error = error.__cause__
    return False


def as_auto(dynamic_shapes):
    """The same dims, each Dim.DYNAMIC spelled Dim.AUTO."""
    from torch.export import Dim

    if isinstance(dynamic_shapes, dict):
        return {key: as_auto(value) for key, value in dynamic_shapes.items()}
    if isinstance(dynamic_shapes, (list, tuple)):
        return type(dynamic_shapes)(as_auto(value) for value in dynamic_shapes)
    return Dim.AUTO if dynamic_shapes == Dim.DYNAMIC else dynamic_shapes


class _Specializations(logging.Handler):
    """Collects torch's structured 'symbolic_shape_specialization' events: (source, value, frames)."""

    def __init__(self):
        super().__init__(logging.DEBUG)
        self.events: list[tuple[str, str, list[tuple[str, int]]]] = []

    def emit(self, record):
        event = getattr(record, "metadata", {}).get("symbolic_shape_specialization")
        if not event:
            return
        from torch._logging.structured import INTERN_TABLE

        names = {number: name for name, number in INTERN_TABLE.items()}
        frames = [(names.get(f.get("filename"), ""), f.get("line")) for f in event.get("user_stack") or
                  event.get("stack") or []]
        for source in event.get("sources", []):
            self.events.append((source, event.get("value"), frames))


@contextmanager
def recording_specializations():
    handler = _Specializations()
    trace = logging.getLogger("torch.__trace")
    trace.addHandler(handler)
    try:
        yield handler.events
    finally:
        trace.removeHandler(handler)


def _leaf_names(input_set) -> list[str]:
    from torch.utils import _pytree as pytree

    flat, _ = pytree.tree_flatten_with_path((input_set.args, input_set.kwargs))
    return [(pytree.keystr(path).split("'")[1] if "'" in pytree.keystr(path) else f"input {i + 1}")
            for i, (path, _) in enumerate(flat)]


def _pinned_at(events, name: str, leaf: int, dim: int):
    """The frames of the specialization event for this input's dim, if one was recorded."""
    for source, _, frames in events:
        match = _SOURCE.search(source)
        if match and ((match.group(1) == name and int(match.group(2)) == dim)
                      or (match.group(3) is not None and int(match.group(3)) == leaf and int(match.group(4)) == dim)):
            return frames
    return None


def retried_findings(stage: str, ctx, program, first_error: BaseException, events, asked: list[dict]) -> list[Finding]:
    """`dynamic-shape` findings for the Dim.AUTO export: one per dim that came out static, at the line
    that pinned it; or one saying every dim stayed dynamic."""
    from compatcheck.errors import one_line

    names = _leaf_names(ctx.spec.input_sets[0])
    placeholders = [node for node in program.graph.nodes if node.op == "placeholder"
                    and node.name in program.graph_signature.user_inputs]
    why = (f"exporting with the inferred dims as Dim.DYNAMIC failed ({one_line(first_error, 200)}), not because "
           "a dim had to be static; exported again with Dim.AUTO")
    findings = []
    for leaf, (dims, node) in enumerate(zip(asked, placeholders)):
        shape = node.meta["val"].shape
        for dim in sorted(dims):
            if isinstance(shape[dim], int):
                frames = _pinned_at(events, names[leaf], leaf, dim)
                findings.append(ctx.spec.user.finding(
                    stage, "dynamic-shape",
                    f"{why}: dim {dim} of {names[leaf]} came out static (size {shape[dim]}), so the artifact takes "
                    "only that size there; every input set is checked against it",
                    op=f"{names[leaf]}[{dim}]", stack=frames or []))
    if not findings:
        findings.append(ctx.spec.user.finding(
            stage, "dynamic-shape", f"{why}: every inferred dim stayed dynamic, and every input set is checked "
                                    "against the artifact", op="Dim.AUTO"))
    return findings
