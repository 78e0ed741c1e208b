"""Findings for a torch.export failure, for every stage that exports (export, onnx_export): a
dynamic dimension the code pins (`dynamic-shape`), a branch or a size that depends on input values
(`data-dependent-guard`), else the error at the user's line."""

from __future__ import annotations

import re

from compatcheck.diagnose import shapes
from compatcheck.diagnose.catalog import with_rewrites
from compatcheck.diagnose.constructs import construct
from compatcheck.diagnose.errors import Diagnosed, error_finding, error_stack, locate
from compatcheck.diagnose.outputs import output_type_findings
from compatcheck.diagnose.found import finding_at

_UNSAVED = re.compile(r"Failed serializing node (\S+) in graph")
# Ceil division of a size by an integer, which integer arithmetic does without a symbolic math.ceil.
_CEIL_DIVISION = re.compile(r"math\.ceil\(\s*([^()/]+?)\s*/\s*(\d+)\s*\)")
_GUARD = re.compile(r"Could not guard on data-dependent expression (.+?) \(unhinted")
_SPECIALIZE = re.compile(r"Could not extract specialized integer from data-dependent expression (.+?) \(unhinted")


class ExportFailed(Diagnosed):
    """torch.export's error, restated with its cause at the user's line."""


def data_dependent(error: BaseException) -> str | None:
    """What a data-dependent error means for the user, or None for other errors."""
    guard = _GUARD.search(str(error))
    if guard:
        return f"the code branches on a value computed from the input (data-dependent guard {guard.group(1)})"
    size = _SPECIALIZE.search(str(error))
    if size:
        return ("the code turns a value computed from the input into a Python int "
                f"(data-dependent expression {size.group(1)})")
    return None


def torch_export_findings(stage: str, ctx, cause: BaseException) -> list:
    """Findings for the innermost error torch.export raised."""
    pinned = shapes.error_findings(stage, ctx, cause) or output_type_findings(stage, ctx, cause)
    if pinned:
        return pinned
    meaning = data_dependent(cause)
    if meaning is None:
        return [error_finding(stage, ctx, cause, "export-error")]
    finding = finding_at(ctx.spec.user, stage, "data-dependent-guard", meaning, location=locate(ctx, cause),
                                    stack=error_stack(ctx, cause))
    finding.op = construct(finding.code)
    return [finding]


SAVE_FAILED = "the program exported, but saving it failed"  # the recipe search tries a static export after it

def save_failed(stage: str, ctx, program, error: BaseException) -> BaseException:
    """torch.export.save's error on a symbolic node of a program that exported (torch cannot serialize
    every op on sizes, e.g. math.ceil), restated at the user's line that made the node; other errors as
    they were."""
    import torch

    found = _UNSAVED.search(str(error))
    node = next((n for n in program.graph.nodes if found and n.name == found.group(1)), None)
    if node is None or not isinstance(node.meta.get("val"), (torch.SymInt, torch.SymFloat, torch.SymBool)):
        return error
    op = f"{getattr(node.target, '__module__', None) or 'builtins'}.{getattr(node.target, '__name__', node.target)}"
    integer = ("; integer arithmetic keeps the dims dynamic and saves: -(-a // b) for math.ceil(a / b)"
               if op == "math.ceil" else "")
    stack = node.meta.get("stack_trace")
    finding = finding_at(ctx.spec.user, stage, "export-error", f"{SAVE_FAILED} on its {op} of a dynamic size, "
                         f"which torch.export.save cannot serialize (a static export is tried as a recipe){integer}",
                         location=ctx.spec.user.from_stack_text(stack), op=op, stack=stack)
    ceil = _CEIL_DIVISION.search(finding.code or "")
    if ceil:
        finding.rewrite = _CEIL_DIVISION.sub(r"-(-\1 // \2)", finding.code)
    return ExportFailed(headline("torch.export.save", [finding]), [finding])


def headline(step: str, findings: list, also: str = "") -> str:
    """'<step> failed at m.py:12: <the first finding>', for the stage's reason."""
    first = findings[0]
    return f"{step} failed{f' at {first.where}' if first.where else ''}: {first.message}{also}"


def pinned_findings(stage: str, ctx, program) -> list:
    """When the stage's program failed on an input set: the dynamic dimensions it holds as constants."""
    from compatcheck.diagnose.replay import first_mismatch

    if program is None or first_mismatch(ctx) is None:
        return []
    pinned = shapes.pinned_in_program(ctx, program)
    return shapes.findings(stage, ctx, pinned) if pinned else []


@with_rewrites
def stage_findings(stage: str, ctx, error: BaseException | None, program=None, kind: str = "export-error") -> list:
    """A stage's findings: those its restated error carries, else the error at the user's line; for a
    program that built but failed on an input set, the dimensions it pinned."""
    if error is None:
        return pinned_findings(stage, ctx, program) + state_findings(stage, ctx)
    if isinstance(error, Diagnosed):
        return error.findings
    return output_type_findings(stage, ctx, error) or [error_finding(stage, ctx, error, kind)]


_UNREGISTERED = re.compile(r"The tensor attribute self\.([\w.]+) was assigned during export")


def state_findings(stage: str, ctx) -> list:
    """torch.export's warning that forward assigns a tensor attribute, at the line that assigns it: the
    exported program computes with the value but keeps none of it between calls."""
    from compatcheck.frames import user_sources

    findings = []
    for warning, _ in ctx.warnings:
        found = _UNREGISTERED.search(str(warning.message))
        if found is None:
            continue
        name = found.group(1)
        assigns = re.compile(rf"\bself\.{re.escape(name)}\s*=[^=]")
        location = None
        for _, file, start, lines in user_sources(ctx.spec.model, ctx.spec.user):
            line = next((start + i for i, text in enumerate(lines) if assigns.search(text)), None)
            if line is not None:
                location = (file, line)
                break
        finding = finding_at(ctx.spec.user,
            stage, "unregistered-state", f"forward assigns the tensor attribute self.{name}: the exported program "
            "uses the value within the call but does not keep it between calls, as eager does. Register it as a "
            "buffer and write into it, or keep it a local if nothing reads it later", location=location,
            op=f"self.{name}")
        if finding.code:
            finding.rewrite = (f"# in __init__: state the exported program keeps\n"
                               f"self.register_buffer({name!r}, torch.zeros(SHAPE), persistent=False)\n"
                               f"# in forward: write into it in place\n"
                               f"self.{name}.copy_({finding.code.split('=', 1)[1].strip()})")
        findings.append(finding)
    return findings
