"""Torch's bug is torch's: where a stage failed inside library code, at a call of torch's own, that call
is replayed alone with arguments of the same kinds (symbolic sizes where the model's were) in a module of
two lines, built the way the stage builds. Only if torch alone fails the same way is torch blamed, with
those lines; otherwise the library finding keeps its advice.

The call and its arguments are read where the library made them: the model is exported (non-strict, with
its dynamic shapes), and the library's frame in the error's traceback holds the values on that line.
Only names, attributes, subscripts and constants on it are evaluated there: the line ran them already."""

from __future__ import annotations

import ast
import linecache
import re

import torch

from compatcheck.deadline import within
from compatcheck.diagnose.dynamo import budget
from compatcheck.diagnose.found import plain
from compatcheck.errors import chain, one_line
from compatcheck.frames import library_path
from compatcheck.report.model import Finding

# How each stage builds the two-line module, after its inputs are made.
BUILDS = {
    "export": "torch.export.export(Repro(), ({tupled}), dynamic_shapes=({shapes}))",
    "compile": "{marks}torch.compile(Repro())({args})",
    "compile_fullgraph": "{marks}torch.compile(Repro(), fullgraph=True)({args})",
}
_NAMESPACES = (torch, torch.nn.functional, torch.linalg, torch.fft, torch.special)
_MOST_CALLS = 3  # calls of torch's on the library's line tried, innermost first


class _Unspellable(Exception):
    """A value torch alone cannot be written to make (a library's object, a SymFloat)."""


def torch_reproduced(stage: str, ctx, findings: list[Finding], error: BaseException | None) -> list[Finding]:
    """`findings`, and where the first library finding's call of torch fails alone the same way, a
    `torch-bug` finding with the reproduction after it; the library finding's advice then points there."""
    library = next((f for f in findings if f.library_file and f.library_line), None)
    if stage not in BUILDS or error is None or library is None or ctx.spec.dynamic_shapes is None:
        return findings
    cause = _signature([*chain(error)][-1])  # what torch raised, under what the stage restated it as
    try:
        with within(budget(ctx)):
            for name, source in _reproductions(stage, ctx, library):
                same = next((one for one in chain(_raises(source)) if _signature(one) == cause), None)
                if same is not None:
                    return _blamed(stage, findings, library, name, source, same)
    except Exception:  # a check that cannot run proves nothing: the library finding stands as it was
        return findings
    return findings


def _blamed(stage: str, findings: list[Finding], library: Finding, name: str, source: str,
            same: BaseException) -> list[Finding]:
    package = library.library_file.split("/", 1)[0]
    library.advice = (f"The cause is torch's, not {package}'s: {name} fails the same way with torch alone (the "
                      f"torch-bug finding below). Another release of {package} would not help.")
    bug = plain(stage, "torch-bug", f"torch {torch.__version__} itself fails at {package}'s call of {name}: checked "
                f"by running the lines shown, torch alone with arguments of the same kinds, which raised the same "
                f"error here: {one_line(same, 200)}", op=name, rewrite=source,
                advice="Report it to PyTorch with these lines; meanwhile build with static sizes (the passes-with "
                       "finding, where one is proven).",
                **{field: getattr(library, field) for field in
                   ("file", "line", "code", "library_file", "library_line", "library_code")})
    at = findings.index(library) + 1
    return [*findings[:at], bug, *findings[at:]]


def _signature(error: BaseException) -> tuple[str, str]:
    """An error's type and first line, without what differs between two runs (addresses, symbols' names)."""
    first = (str(error).strip().splitlines() or [""])[0]
    return type(error).__name__, re.sub(r"0x[0-9a-f]+|\bs\d+\b", "#", first)


def _raises(source: str) -> BaseException | None:
    """What running the reproduction raised, or None where it ran through."""
    torch._dynamo.reset()
    try:
        exec(compile(source, "<reproduction>", "exec"), {"__name__": "reproduction"})  # our own lines, made below
    except Exception as exc:
        return exc
    finally:
        torch._dynamo.reset()
    return None


def _reproductions(stage: str, ctx, library: Finding):
    """(the torch call's name, the reproduction's source) for each call of torch's on the library's line."""
    frame = _library_frame(ctx, library)
    if frame is None:
        return
    calls = 0
    for call in _calls(frame.f_code.co_filename, library.library_line):
        try:
            spelled = _spelled_call(stage, frame, call)
        except Exception:  # not a call of torch's, or arguments torch alone cannot make
            continue
        yield spelled
        calls += 1
        if calls == _MOST_CALLS:
            return


def _library_frame(ctx, library: Finding):
    """The library's frame at the finding's line, with the values it held there, from the traceback of a
    non-strict export of a copy of the model; None where that export does not fail there."""
    model = ctx.spec.pristine.copy() if ctx.spec.pristine else ctx.spec.model
    sample = ctx.spec.input_sets[0]
    try:
        with torch.no_grad():
            torch.export.export(model, tuple(sample.args), sample.kwargs or None,
                                dynamic_shapes=ctx.spec.dynamic_shapes, strict=False)
    except Exception as exc:
        for one in chain(exc):
            tb, found = one.__traceback__, None
            while tb is not None:
                if tb.tb_lineno == library.library_line and \
                        library_path(tb.tb_frame.f_code.co_filename, ctx.spec.user.packages) == library.library_file:
                    found = tb.tb_frame
                tb = tb.tb_next
            if found is not None:
                return found
    return None


def _calls(filename: str, line: int) -> list[ast.Call]:
    """The calls on `line` of the file, innermost first."""
    tree = ast.parse("".join(linecache.getlines(filename)))
    calls = [node for node in ast.walk(tree) if isinstance(node, ast.Call) and node.lineno <= line <= node.end_lineno]
    return sorted(calls, key=lambda node: (node.end_lineno - node.lineno, node.end_col_offset - node.col_offset))


def _spelled_call(stage: str, frame, call: ast.Call) -> tuple[str, str]:
    """(the torch call's name, the reproduction's source) for `call` as the frame made it; _Unspellable
    where it is not a call of torch's."""
    inputs: list[tuple[str, tuple[int, ...], torch.dtype, str, tuple[int, ...]]] = []
    if isinstance(call.func, ast.Attribute) and isinstance(_value(frame, call.func.value), torch.Tensor):
        if not hasattr(torch.Tensor, call.func.attr):
            raise _Unspellable(call.func.attr)
        name = f"Tensor.{call.func.attr}"
        function = f"{_spelled(_value(frame, call.func.value), inputs)}.{call.func.attr}"
    else:
        found = _value(frame, call.func)
        space = next((one for one in _NAMESPACES if getattr(one, getattr(found, "__name__", ""), None) is found), None)
        if space is None:
            raise _Unspellable(ast.unparse(call.func))
        name = function = f"{space.__name__}.{found.__name__}"
    if any(isinstance(one, ast.Starred) for one in call.args) or any(one.arg is None for one in call.keywords):
        raise _Unspellable("*args")
    spelled = [_spelled(_value(frame, one), inputs) for one in call.args]
    spelled += [f"{one.arg}={_spelled(_value(frame, one.value), inputs)}" for one in call.keywords]
    return name, _source(stage, f"{function}({', '.join(spelled)})", inputs)


def _value(frame, node: ast.AST):
    """The value of a name, attribute, subscript or constant as the frame has it."""
    if isinstance(node, ast.Constant):
        return node.value
    if isinstance(node, ast.Name):
        scope = next((one for one in (frame.f_locals, frame.f_globals) if node.id in one), None)
        if scope is None:
            raise _Unspellable(node.id)
        return scope[node.id]
    if isinstance(node, ast.Attribute):
        return getattr(_value(frame, node.value), node.attr)
    if isinstance(node, ast.Subscript):
        return _value(frame, node.value)[_value(frame, node.slice)]
    if isinstance(node, ast.Slice):
        return slice(*(_value(frame, one) if one else None for one in (node.lower, node.upper, node.step)))
    if isinstance(node, (ast.Tuple, ast.List)):
        items = [_value(frame, one) for one in node.elts]
        return tuple(items) if isinstance(node, ast.Tuple) else items
    if isinstance(node, ast.UnaryOp) and isinstance(node.op, ast.USub):
        return -_value(frame, node.operand)
    raise _Unspellable(type(node).__name__)


def _spelled(value, inputs: list) -> str:
    """`value` in the reproduction: a tensor or a size as one of its inputs (symbolic where it was), else
    a literal."""
    if isinstance(value, torch.Tensor):
        return _input(inputs, value.shape, value.dtype, value.device)
    if isinstance(value, torch.SymInt):
        return f"{_input(inputs, (value,), torch.float32)}.shape[0]"
    if isinstance(value, torch.Size):
        return f"{_input(inputs, value, torch.float32)}.shape"
    if isinstance(value, (tuple, list)) and any(isinstance(one, torch.SymInt) for one in value) and \
            all(isinstance(one, (int, torch.SymInt)) for one in value):
        return f"{type(value).__name__}({_input(inputs, value, torch.float32)}.shape)"
    if isinstance(value, (tuple, list)):
        items = ", ".join(_spelled(one, inputs) for one in value)
        return f"({items}{',' if len(value) == 1 else ''})" if isinstance(value, tuple) else f"[{items}]"
    if isinstance(value, torch.device):
        return f"torch.device({str(value)!r})"
    if isinstance(value, (torch.dtype, torch.layout, torch.memory_format)):
        return str(value)
    if value is None or isinstance(value, (bool, int, str)) or isinstance(value, float) and value == value \
            and abs(value) != float("inf"):
        return repr(value)
    raise _Unspellable(type(value).__name__)


def _input(inputs: list, shape, dtype: torch.dtype, device=torch.device("cpu")) -> str:
    """A new input of the reproduction: its sizes those the model's run had, symbolic where they were."""
    sizes = tuple(int(one.node.hint) if isinstance(one, torch.SymInt) else int(one) for one in shape)
    dynamic = tuple(dim for dim, one in enumerate(shape) if isinstance(one, torch.SymInt))
    name = f"x{len(inputs)}"
    inputs.append((name, sizes, dtype, str(device), dynamic))
    return name


def _source(stage: str, call: str, inputs: list) -> str:
    """The reproduction: a module whose forward is the one call, built as the stage builds."""
    names = [name for name, *_ in inputs]
    made = [f"{name} = torch.{'randn' if dtype.is_floating_point else 'zeros'}({sizes!r}"
            f"{'' if dtype == torch.float32 else f', dtype={dtype}'}"
            f"{'' if device == 'cpu' else f', device={device!r}'})" for name, sizes, dtype, device, _ in inputs]
    marks = "".join(f"torch._dynamo.mark_dynamic({name}, {dim})\n" for name, *_, dynamic in inputs for dim in dynamic)
    shapes = ", ".join("{" + ", ".join(f"{dim}: torch.export.Dim.DYNAMIC" for dim in dynamic) + "}" if dynamic
                       else "None" for *_, dynamic in inputs)
    args = ", ".join(names) + ("," if len(names) == 1 else "")
    return "\n".join([
        "import torch", "", "",
        "class Repro(torch.nn.Module):",
        f"    def forward(self{''.join(', ' + name for name in names)}):",
        f"        return {call}", "", "",
        *made,
        BUILDS[stage].format(args=", ".join(names), tupled=args, shapes=shapes + ("," if len(inputs) == 1 else ""),
                             marks=marks),
    ]) + "\n"
