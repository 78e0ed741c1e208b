"""Findings for TorchScript: the script frontend's errors, the tracer's warnings and refusals."""

from __future__ import annotations

import ast
import inspect
import linecache
import re
import sys
import textwrap
import traceback
import types
from pathlib import Path

from compatcheck.causes import cause_first
from compatcheck.diagnose.catalog import with_rewrites
from compatcheck.diagnose.constructs import construct
from compatcheck.diagnose.replay import first_mismatch
from compatcheck.frames import machinery, user_sources
from compatcheck.diagnose.found import finding_at

_PYTHON_CALL = re.compile(r"Could not export Python function call '(\w+)'")
_BUILTIN = re.compile(r"Python builtin <built-in (?:function|method) (\w+)")
_UNKNOWN_OP = re.compile(r"Unknown builtin op: (\S+)\.")
_NO_OVERLOAD = re.compile(r"Arguments for call are not valid.*?^\s*(\w+::\w+)[.\w]*\(", re.S | re.M)


def _first_line(error: BaseException) -> str:
    """The error's line that names the cause, first in TorchScript's own errors but for the families
    causes.py knows: it puts the source range, printed anyway, on the next ones."""
    first = next(iter(cause_first([line.strip() for line in str(error).splitlines() if line.strip()])), "")
    return f"{type(error).__name__}: {first}".rstrip(": ")


def _numpy_calls(ctx) -> list[tuple[str, int, list[str]]]:
    """(file, line, ['numpy.sqrt', ...]) for each line of a user forward that calls into numpy."""
    found = []
    for forward, file, start, lines in user_sources(ctx.spec.model, ctx.spec.user):
        by_line: dict[int, list[str]] = {}
        for node in ast.walk(ast.parse(textwrap.dedent("".join(lines)))):
            if not isinstance(node, ast.Call):
                continue
            parts, target = [], node.func
            while isinstance(target, ast.Attribute):
                parts.insert(0, target.attr)
                target = target.value
            root = forward.__globals__.get(target.id) if isinstance(target, ast.Name) else None
            if isinstance(root, types.ModuleType) and root.__name__.split(".")[0] == "numpy":
                by_line.setdefault(start + node.lineno - 1, []).append(".".join(["numpy", *parts]))
        found += [(file, line, list(dict.fromkeys(ops))) for line, ops in sorted(by_line.items())]
    return found


def _python_call(ctx, name: str) -> str:
    """What a Python call TorchScript kept is: an autograd.Function, or just the name."""
    import torch

    for module in ctx.spec.model.modules():
        obj = vars(sys.modules.get(type(module).__module__, object)).get(name)
        if isinstance(obj, type) and issubclass(obj, torch.autograd.Function):
            return "torch.autograd.Function"
    return name


def _frontend_finding(stage: str, ctx, error: BaseException, kind: str):
    """A finding for a TorchScript error, at the first user location it prints: the failing source
    range comes first, then the call sites (script), or the innermost frame first (trace)."""
    user = ctx.spec.user
    text = str(error)
    ranges = user.locations(text)
    location = ranges[0] if ranges else user.from_exception(error)
    message, op = _first_line(error), None
    if match := _PYTHON_CALL.search(text):
        op = _python_call(ctx, match.group(1))
        if op == "torch.autograd.Function":
            message = (f"{match.group(1)} is a torch.autograd.Function: TorchScript keeps its apply() as a call "
                       "into Python, which torch.jit.save refuses")
        kind = "unsupported-python"
    elif match := _BUILTIN.search(text):
        op = match.group(1)
    elif match := _UNKNOWN_OP.search(text):
        op = match.group(1)
    elif match := _NO_OVERLOAD.search(text):
        op, kind = match.group(1).replace("::", "."), "script-signature"
    return finding_at(user, stage, kind, message, location=location, op=op)


def _library_modules(model):
    """(attribute path, module, library file) for each submodule, the model included, whose class is
    library code, outermost first."""
    from compatcheck.frames import library_path

    for name, module in model.named_modules():
        try:
            file = inspect.getsourcefile(type(module))
        except TypeError:
            continue
        if library_path(file):
            yield name, module, file


def _calling_line(ctx, attribute: str):
    """The line of a user forward that uses `self.<attribute>` (the call into the library), if any."""
    head = attribute.split(".")[0]
    for _, file, start, lines in user_sources(ctx.spec.model, ctx.spec.user):
        for node in ast.walk(ast.parse(textwrap.dedent("".join(lines)))):
            if isinstance(node, ast.Attribute) and node.attr == head and getattr(node.value, "id", None) == "self":
                return file, start + node.lineno - 1
    return None


def _library_not_scriptable(stage: str, ctx, error: BaseException):
    """A finding when scripting failed in library code the model calls: not something the user can
    rewrite, so it says what TorchScript does and what works instead (routes are added at assembly)."""
    from compatcheck.frames import library_path

    user = ctx.spec.user
    text = str(error)
    if user.locations(text):
        return None  # the failing source range is the user's: the frontend finding points at it
    modules = list(_library_modules(ctx.spec.model))
    if not modules:
        return None
    # A decorator can make TorchScript name a file with a line it does not have: such a place is no place.
    named = next(((name, line) for name, line in reversed(ctx.spec.user.printed_locations(text))
                  if library_path(name) and linecache.getline(name, line).strip()), None)
    # Without a library location, the error must at least name something the library's modules define.
    words = set(re.findall(r"\b[A-Za-z_]\w*", text))
    if named is None and not any(words & set(vars(sys.modules.get(type(m).__module__, object)))
                                 for _, m, _ in modules):
        return None
    # The submodule whose own code failed, where the error names its file; else the outermost one.
    failed = [m for m in modules if named is not None and Path(m[2]).resolve() == Path(named[0]).resolve()]
    attribute, module, file = (failed or modules)[0]
    if named is not None:
        file, line = named
    else:  # the class statement, below its decorators
        source, start = inspect.getsourcelines(type(module))
        line = start + next((i for i, text in enumerate(source) if text.lstrip().startswith("class ")), 0)
    package = library_path(file).split("/", 1)[0]
    finding = finding_at(user, stage, "library-not-scriptable", (
        f"torch.jit.script compiles everything reachable from forward, including {package} code it cannot "
        f"compile ({type(module).__name__} and what it calls): {_first_line(error)}. {package} models are "
        "not written to be scripted."), location=_calling_line(ctx, attribute) if attribute else None,
        stack=[], op=type(module).__name__)
    finding.library_file, finding.library_line = library_path(file), line
    finding.library_code = linecache.getline(file, line).strip() or None
    finding.advice = (f"Do not script {package} models: trace, export or compile them instead (torch.jit.trace, "
                      "torch.export, torch.onnx.export, torch.compile).")
    return finding


@with_rewrites
def script_findings(stage: str, ctx, error: BaseException | None) -> list:
    if error is None:
        return []
    # The frontend fails on a numpy function before it has a source range to print.
    if "cannot create weak reference to 'numpy" in str(error):
        calls = _numpy_calls(ctx)
        if calls:
            return [finding_at(ctx.spec.user, stage, "unsupported-python",
                                          f"TorchScript cannot compile numpy calls ({', '.join(ops)})",
                                          location=(file, line), op=ops[0]) for file, line, ops in calls]
    library = _library_not_scriptable(stage, ctx, error)
    if library is not None:
        return [library]
    return [_frontend_finding(stage, ctx, error, "unsupported-python")]


# TracerWarning text -> (kind, op when the source line names none)
_TRACER = (
    ("Python boolean", "frozen-control-flow", "bool()"),
    ("Python number", "frozen-constant", "float()"),
    ("Python index", "frozen-constant", "index"),
    ("Python list", "frozen-constant", "Tensor.tolist"),
    ("NumPy array", "frozen-constant", "Tensor.numpy"),
    ("torch.from_numpy", "frozen-constant", "torch.from_numpy"),
    ("Iterating over a tensor", "frozen-shape", "iteration"),
)


def _tracer_finding(stage: str, ctx, message: str, stack):
    kind, op = next(((k, o) for text, k, o in _TRACER if text in message), ("trace-warning", None))
    if kind != "trace-warning":  # the rest of the tracer's text is the same for all of them
        message = message.split(". ")[0].rstrip(".") + ": the trace keeps what input set 1 gave, as a constant."
    finding = finding_at(ctx.spec.user, stage, kind, message, stack=stack)
    if kind == "frozen-control-flow" or op == "float()":
        finding.op = construct(finding.library_code or finding.code) or op
    else:
        finding.op = op
    return finding


def _container_output(stage: str, ctx, error: BaseException, container: str):
    """jit.trace refused a dict or list output: point at forward's return statement that builds it."""
    forward = type(ctx.spec.model).forward
    location = None
    try:
        file = inspect.getsourcefile(forward)
        lines, start = inspect.getsourcelines(forward)
        tree = ast.parse(textwrap.dedent("".join(lines)))
        wanted = ast.Dict if container == "dict" else ast.List
        returns = [n for n in ast.walk(tree) if isinstance(n, ast.Return) and isinstance(n.value, wanted)]
        location = (file, start + (returns[0].lineno if returns else 1) - 1)
    except (OSError, TypeError, SyntaxError):
        pass
    if location is None or ctx.spec.user.owns(location[0]):
        return finding_at(ctx.spec.user, stage, "container-output", _first_line(error), location=location, op=container)
    # The model class is library code: the return statement is the library's, the trace call is the user's.
    finding = finding_at(ctx.spec.user, stage, "container-output", _first_line(error), op=container,
                                    stack=[traceback.FrameSummary(location[0], location[1], "forward")])
    finding.advice = (f"{type(ctx.spec.model).__name__} returns a {container}: trace it with "
                      "torch.jit.trace(model, example_inputs, strict=False) when its keys never change with the "
                      f"input, or wrap it in a module of yours whose forward returns a tuple of the {container}'s "
                      "values.")
    return finding


# jit.trace refusing what forward returns: an object it cannot type, a list of dicts, a dict.
_REFUSED_OUTPUT = re.compile(r"Tracer cannot infer type of|can be output from traced functions|"
                             r"Encountering a (dict|list) at the output of the tracer")


def refused_output(error: BaseException | None) -> bool:
    """Whether jit.trace failed on the structure of forward's outputs."""
    return error is not None and bool(_REFUSED_OUTPUT.search(str(error)))


def _pinned_sizes(stage: str, ctx, findings: list) -> list:
    """A trace keeps every size it saw, often without a warning: the dynamic dimensions the code pins
    come first, replacing any tracer warning on the same line."""
    from compatcheck.diagnose import shapes

    pinned = shapes.findings(stage, ctx, shapes.pinned_by_code(ctx))
    lines = {(f.file, f.line) for f in pinned}
    return pinned + [f for f in findings if (f.file, f.line) not in lines]


@with_rewrites
def trace_findings(stage: str, ctx, error: BaseException | None) -> list:
    import torch

    findings = []
    seen = set()
    for warning, stack in ctx.warnings:
        if not issubclass(warning.category, torch.jit.TracerWarning):
            continue
        if machinery(warning.filename) and "Python boolean" in str(warning.message):
            continue  # a branch inside torch's own code (a size check in nn.functional, torch._assert) is not the model's
        frame = ctx.spec.user.innermost(stack)
        library = ctx.spec.user.library_frame(stack)
        message = str(warning.message).strip()
        key = (frame.filename if frame else None, frame.lineno if frame else None, library, message)
        if key not in seen:
            seen.add(key)
            findings.append(_tracer_finding(stage, ctx, message, stack))
    if findings and error is None:
        index = first_mismatch(ctx)
        if index is not None:
            for finding in findings:
                if finding.kind.startswith("frozen-"):
                    finding.message += f" Input set {index + 1} proves it: there the trace differs from eager."
    if error is None and first_mismatch(ctx) is not None:
        findings = _pinned_sizes(stage, ctx, findings)
    if error is not None:  # what stopped the trace comes first: the warnings before it did not
        container = re.search(r"Encountering a (dict|list) at the output of the tracer", str(error))
        if container:
            findings.insert(0, _container_output(stage, ctx, error, container.group(1)))
        else:
            findings.insert(0, _frontend_finding(stage, ctx, error, "trace-error"))
    return findings
