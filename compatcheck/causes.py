"""The line of an error that names its cause. Some tools put a line first that explains nothing (the
TorchScript frontend's "Arguments for call are not valid.", its interpreter's "The following operation
failed in the TorchScript interpreter.", onnxruntime's C++ file and function before its condition): each
rule here, for one error family, rewrites such a message's lines so that the first one is the cause."""

from __future__ import annotations

import re
from collections import Counter

_SCHEMA = re.compile(r"^(\w+::\w+)[.\w]*\(.*\)\s*->.*:$")
_RAISED = re.compile(r"^[A-Za-z_][\w.]*(?:Error|Exception): \S")
_UNTYPED = re.compile(r"(Only tensors .*?but instead got value of type \w+\.?)")
_CLASS = re.compile(r"^<class '(?:[\w.]+\.)?(\w+)'>: ")
_ORT_SOURCE = re.compile(r"/onnxruntime_src/\S+:\d+ |\b(?:onnxruntime|std)::[\w:<>~]+\((?:[^()]|\([^()]*\))*\)\s*")


def _overloads(lines: list[str]) -> list[str] | None:
    """TorchScript's frontend found no overload that takes the call's arguments: what most overloads said
    was missing (`Argument p not provided` for `h.norm(dim=-1)`)."""
    complaints = [(match.group(1), lines[i + 1]) for i, line in enumerate(lines[:-1])
                  if (match := _SCHEMA.match(line))]
    if not complaints:
        return None
    (op, said), _ = Counter(complaints).most_common(1)[0]
    return [f"Arguments for call are not valid: no overload of {op} takes them; most say: {said}", *lines[1:]]


def _interpreter(lines: list[str]) -> list[str] | None:
    """The TorchScript interpreter restates the error it ran into last, under the TorchScript traceback (its
    frames are the trace's, not the cause)."""
    raised = [line for line in lines[1:] if _RAISED.match(line)]
    return [f"the TorchScript interpreter raised {raised[-1]}"] if raised else None


def _onnxruntime(lines: list[str]) -> list[str] | None:
    """onnxruntime's status message names the C++ file and function before the condition that failed."""
    cleaned = [_ORT_SOURCE.sub("", line) for line in lines]
    return cleaned if cleaned != lines else None


def _bullets(lines: list[str]) -> list[str]:
    """The lines after the first that torch.export writes as a list ("- ..."), without the dash."""
    return [line[2:] for line in lines[1:] if line.startswith("- ")]


def _constraints(lines: list[str]) -> list[str] | None:
    """torch.export's constraint violation: the dims it names, then, on lines of their own, why each broke."""
    why = _bullets(lines)
    return [f"{lines[0].split('!')[0]}: {why[0]}", *why[1:]] if why else None


def _conflicts(lines: list[str]) -> list[str] | None:
    """torch.export's conflicts between the dynamic shapes given and those tracing inferred: its header says
    only that there are some; each line below it names a dim, what was declared and why tracing fixed it."""
    return _bullets(lines) or None


def _onnx_summary(lines: list[str]) -> list[str] | None:
    """The ONNX exporter names the step that failed and what to do next; its exception summary names the
    error, as `<class 'package.Error'>: message`."""
    after = lines[lines.index("## Exception summary") + 1:] if "## Exception summary" in lines else []
    first = _CLASS.sub(r"\1: ", after[0]) if after else None
    return [first, lines[0]] if first else None


def _tracer_type(lines: list[str]) -> list[str] | None:
    """jit.trace prints the whole value it could not type (tensors' values and all) before saying why."""
    why = _UNTYPED.search(" ".join(lines))
    return [f"Tracer cannot infer the type of a value: {why.group(1)}"] if why else None


def _numpy_weakref(lines: list[str]) -> list[str] | None:
    return [f"TorchScript cannot compile a call of numpy ({lines[0]})", *lines[1:]]


# (what the message's first line starts with, or holds, for the family; its rule)
RULES = (
    ("Arguments for call are not valid", _overloads),
    ("The following operation failed in the TorchScript interpreter", _interpreter),
    ("[ONNXRuntimeError]", _onnxruntime),
    ("Non-zero status code returned while running", _onnxruntime),
    ("cannot create weak reference to 'numpy.", _numpy_weakref),
    ("Constraints violated", _constraints),
    ("Found the following conflicts between user-specified ranges and inferred ranges", _conflicts),
    ("Tracer cannot infer type of", _tracer_type),
    ("Failed to convert the exported program to an ONNX model", _onnx_summary),
    ("Failed to export the model with torch.export", _onnx_summary),
    ("Failed to decompose the FX graph for ONNX compatibility", _onnx_summary),
)


def cause_first(lines: list[str]) -> list[str]:
    """`lines` (an error's message, stripped, without empty lines) with the line naming the cause first."""
    for marker, rule in RULES:
        if lines and marker in lines[0]:
            return rule(lines) or lines
    return lines
