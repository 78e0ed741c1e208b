"""Dynamic-shape findings: a dimension that varies across the input sets (or is declared dynamic)
that the model's code pins to the example's size, at the user's line.

torch.export names only the dimension ("... specialized it to be a constant (2)", "tracing inferred
a static shape of 2 for dimension inputs['x'].shape[0]"). The line comes from
torch.export.draft_export's report: it traces again with the dimension left to AUTO and records
every guard with the Python stack that added it. The guard that pins the dimension is the cause;
its stack, walked out of torch and of any library helper, ends at the user's line.

Entry points: `error_findings(stage, ctx, error)` for an export error; `findings(stage, ctx, dims)`
for dimensions known to be pinned otherwise (`pinned_in_program`, `pinned_by_code`); and
`specializations(ctx, dims)` for the guard and the stack behind each, to build findings of one's own.
"""

from __future__ import annotations

import functools
import re
import traceback
from dataclasses import dataclass, field

from compatcheck.diagnose.constructs import construct
from compatcheck.errors import chain_text
from compatcheck.ladder import BY_NAME
from compatcheck.diagnose.found import finding_at

_MARKED = re.compile(r"You marked (\S+) as dynamic but your code specialized it to be a constant \((-?\d+)\)")
_INFERRED = re.compile(r"inferred a static shape of (-?\d+) for dimension (\S+?)\.?(?:\s|$)")
_SOURCE = re.compile(r"^(?:L|inputs)\['([^']+)'\]((?:\[[^\]]+\])*)\.(?:size\(\)|shape)\[(\d+)\]$")
_PINNING_GUARD = re.compile(r"^Eq\((\w+), (-?\d+)\)$")


@dataclass
class Specialization:
    """One dimension pinned to a constant: which, to what, by which guard, from where."""

    dim: str  # as the user writes it: 'x.shape[0]'
    value: int | None
    guard: str | None = None  # the guard that pinned it, e.g. 'Eq(s77, 2)'
    stack: list[traceback.FrameSummary] = field(default_factory=list)  # outermost first, torch left out


def dim_name(source: str) -> str:
    """torch's name of a dimension ("L['x'].size()[0]", "inputs['x'].shape[0]") as 'x.shape[0]'."""
    found = _SOURCE.match(source.strip())
    if not found:
        return source
    name, path, dim = found.groups()
    return f"{name}{path}.shape[{dim}]"


def pinned_dims(error: BaseException | None) -> dict[str, int]:
    """The dynamic dimensions an export error says were pinned, with the constant: {'x.shape[0]': 2}."""
    text = chain_text(error)
    pinned = {dim_name(source): int(value) for source, value in _MARKED.findall(text)}
    pinned.update({dim_name(source): int(value) for value, source in _INFERRED.findall(text)})
    return pinned


def pinned_in_program(ctx, program) -> dict[str, int]:
    """Dimensions an exported program holds as constants although the input sets vary them or the
    model declares them dynamic (an exporter that refined the dynamic shapes it was given)."""
    import torch

    from compatcheck.spec import dynamic_dims

    user_inputs = set(program.graph_signature.user_inputs)
    placeholders = [n for n in program.graph.nodes if n.op == "placeholder" and n.name in user_inputs]
    leaves = [s.leaves() for s in ctx.spec.input_sets]
    declared = dynamic_dims(ctx.spec)
    if len(placeholders) != len(leaves[0]):
        return {}
    pinned = {}
    for index, node in enumerate(placeholders):
        value = node.meta.get("val")
        if not isinstance(value, torch.Tensor):
            continue
        for dim, size in enumerate(value.shape):
            varies = any(one[index].shape[dim] != leaves[0][index].shape[dim] for one in leaves)
            if isinstance(size, int) and (varies or dim in declared[index]):
                pinned[f"{node.name}.shape[{dim}]"] = size
    return pinned


def _frames(report, entries: list[dict]) -> list[traceback.FrameSummary]:
    from torch._logging import structured

    names = {**{v: k for k, v in structured.INTERN_TABLE.items()}, **report.str_to_filename}
    return [traceback.FrameSummary(names.get(e["filename"], "?"), e["line"], e["name"], line=e.get("loc"))
            for e in entries]


@functools.lru_cache(maxsize=1)
def _guards(ctx) -> list[tuple[str, dict[str, str], list[traceback.FrameSummary]]]:
    """(guard, {symbol: dimension}, stack) for every guard draft_export saw, once per worker."""
    import torch

    first = ctx.spec.input_sets[0]
    program = torch.export.draft_export(ctx.spec.model, first.args, first.kwargs or None,
                                        dynamic_shapes=ctx.spec.dynamic_shapes)
    report = program._report
    guards = []
    for failure in report.failures:
        if failure.failure_type.name != "GUARD_ADDED":
            continue
        data = failure.data
        symbols = {sym: dim_name(source) for sym, source in data.get("symbol_to_sources", {}).items()}
        guards.append((data["expr"], symbols, _frames(report, [*(data.get("user_stack") or []), *(data.get("stack") or [])])))
    return guards


def compared_constants(ctx) -> dict[str, list[int]]:
    """Per declared dynamic dimension ('x.shape[1]'), the integers the model's code compares it with, from
    the guards draft_export saw: the sizes where a path the artifact froze may change."""
    if ctx.spec.dynamic_shapes is None or ctx.spec.dynamic_shapes_inferred:
        return {}
    try:
        guards = _guards(ctx)
    except Exception:
        return {}
    found: dict[str, list[int]] = {}
    for expr, symbols, _ in guards:
        numbers = [int(n) for n in re.findall(r"(?<![\w.])\d+(?![\w.])", expr)]
        for symbol, dim in symbols.items():
            if re.search(rf"\b{re.escape(symbol)}\b", expr):
                found.setdefault(dim, []).extend(numbers)
    return found


def pinned_by_code(ctx) -> dict[str, int]:
    """Every dynamic dimension the model's code pins, found by tracing it (for stages whose own
    error does not say, like jit.trace, which keeps the example's sizes without a word)."""
    if ctx.spec.dynamic_shapes is None:  # no dimension varies or is declared dynamic: none to pin
        return {}
    try:
        guards = _guards(ctx)
    except Exception:
        return {}
    pinned = {}
    for expr, symbols, _ in guards:
        pin = _PINNING_GUARD.match(expr)
        if pin and pin.group(1) in symbols:
            pinned.setdefault(symbols[pin.group(1)], int(pin.group(2)))
    return pinned


def specializations(ctx, dims: dict[str, int]) -> list[Specialization]:
    """For each pinned dimension, the guard that pinned it and the stack that added the guard.

    A guard `Eq(s, value)` on the dimension's symbol is the pin itself; failing that, the first
    guard on the symbol (a comparison that bounds it). Without draft_export (older torch) or when
    it fails too, the dimensions come back without a stack.
    """
    try:
        guards = _guards(ctx)
    except Exception:
        guards = []
    declared = _declared_names(ctx)
    found = []
    for dim, value in dims.items():
        source = declared.get(dim, dim)
        on_dim = [(expr, stack) for expr, symbols, stack in guards if source in symbols.values()]
        pins = [(expr, stack) for expr, stack in on_dim if _PINNING_GUARD.match(expr)]
        expr, stack = (pins or on_dim or [(None, [])])[0]
        found.append(Specialization(dim, value, expr, stack))
    return found


def _declared_names(ctx) -> dict[str, str]:
    """{'height': 'x.shape[2]'} for each dim get_dynamic_shapes() declares with a named Dim: torch's
    "You marked height as dynamic" names the Dim, the guards name the input's dimension."""
    from compatcheck.spec import declared_per_input

    if ctx.spec.dynamic_shapes is None or ctx.spec.dynamic_shapes_inferred:
        return {}
    found = {}
    for name, _, dims in declared_per_input(ctx.spec):
        for index, dim in (dims.items() if isinstance(dims, dict) else ()):
            if isinstance(getattr(dim, "__name__", None), str):
                found[dim.__name__] = f"{name}.shape[{index}]"
    return found


_SIZE_BRANCH = re.compile(r"^\s*(?:el)?if\s+(.+?)\s*:\s*$")


def shape_branch(code: str | None, dim: str) -> str | None:
    """For `if x.shape[0] == 3:` on a dynamic size: both branches kept in the graph with torch.cond on
    that condition, or the dim kept static. None for any other line."""
    branch = _SIZE_BRANCH.match(code or "")
    if not branch or not re.search(r"\.(shape\[|size\()", branch.group(1)):
        return None
    condition = branch.group(1)
    tensor = re.match(r"(\w+)\.", condition)
    args = tensor.group(1) if tensor else "x"
    return (f"# the branch depends on a dynamic size: keep both sides in the graph, chosen when it runs\n"
            f"def taken({args}): ...      # the body under `if {condition}:`\n"
            f"def not_taken({args}): ...  # what runs otherwise\n"
            f"out = torch.cond({condition}, taken, not_taken, ({args},))\n"
            f"# or, if deployment only ever sees one size there, keep {dim} static: leave it out of the "
            "dynamic shapes")


def size_used_at(ctx, dims) -> tuple[str, int, str] | None:
    """(file, line, dim) of the first line of a user forward that reads one of `dims` ('x.shape[0]',
    also spelled x.size(0)), a branch on it first: where a size no sample had takes another path."""
    from compatcheck.frames import user_sources

    spelled = {}
    for dim in dims:
        name, index = re.match(r"(\w+)\.shape\[(\d+)\]", dim).groups() if re.match(r"\w+\.shape\[\d+\]", dim) \
            else (None, None)
        if name is not None:
            spelled[dim] = re.compile(rf"\b{name}\.(?:shape\[{index}\]|size\({index}\))")
    found = []
    for _, file, start, lines in user_sources(ctx.spec.model, ctx.spec.user):
        for offset, line in enumerate(lines):
            for dim, pattern in spelled.items():
                if pattern.search(line):
                    found.append((not _SIZE_BRANCH.match(line), file, start + offset, dim))
    return min(found)[1:] if found else None


def call_into_children(ctx) -> tuple[str, int] | None:
    """The one line of the model's forward that calls a submodule (`return self.lm(...)`), when the model
    is the user's: where their code hands over to the library that did the rest."""
    import inspect

    model = ctx.spec.model
    try:
        lines, start = inspect.getsourcelines(type(model).forward)
        file = inspect.getsourcefile(type(model).forward)
    except (OSError, TypeError):
        return None
    if not ctx.spec.user.owns(file):
        return None
    children = {name for name, _ in model.named_children()}
    calls = [start + offset for offset, line in enumerate(lines)
             if any(name in children for name in re.findall(r"\bself\.(\w+)\s*\(", line))]
    return (file, calls[0]) if len(calls) == 1 else None


def _called_from(user, stack, at) -> str:
    """' (in helper(), called from forward() at m.py:18)' when the pinning line is in a function the
    model calls: the outermost of the user's frames says where the model reaches it."""
    callers = [f for f in stack if user.owns(f.filename) and (f.filename, f.name) != (at.filename, at.name)]
    if not callers:
        return ""
    outer = callers[0]
    return f" (in {at.name}(), called from {outer.name}() at {user.display(outer.filename)}:{outer.lineno})"


def findings(stage: str, ctx, dims: dict[str, int]) -> list:
    """A `dynamic-shape` finding per pinned dimension, at the line that pinned it; with the stage's artifact
    at hand, only for a dimension it fails at another size of (pins.py), and where it serves every size
    tried, the value that changes an output's size instead."""
    from compatcheck.diagnose.pins import at_other_sizes

    user = ctx.spec.user
    why = "it varies across the input sets" if ctx.spec.dynamic_shapes_inferred else "get_dynamic_shapes() says so"
    result, serves = [], []
    for one in specializations(ctx, dims):
        checked = at_other_sizes(ctx, one.dim)
        if checked is not None and checked[1]:
            serves += checked[0]
            continue
        # In library code the guard's stack may hold no frame of the user's: then the line of theirs that
        # calls into the library is where the finding points.
        at = user.innermost(one.stack) or call_into_children(ctx)
        pinned = f"pinned it to {one.value}" if one.value is not None else "pinned it"
        how = "" if not isinstance(at, traceback.FrameSummary) else _called_from(user, one.stack, at)
        message = (f"{one.dim} is dynamic ({why}) but this code {pinned}{how}: {BY_NAME[stage].artifact} accepts only "
                   "that size")
        finding = finding_at(user, stage, "dynamic-shape", message, location=at, stack=one.stack)
        finding.op = construct(finding.code)
        finding.rewrite = shape_branch(finding.code, one.dim)
        if checked is not None:
            finding.checked_by = f"the artifact, run on input set 1 at {checked[0][-1]}, did not match eager"
        result.append(finding)
    return result + value_sized(stage, ctx, serves) if serves else result


# The tracer's warning on the line that turns a tensor's value into a Python number.
_TO_PYTHON = ("Python integer", "Python number", "Python index")


def value_sized(stage: str, ctx, serves: list[str]) -> list:
    """Where the artifact served every other size of the dims said pinned (`serves`), the finding that
    names what does break it, when it is an output size that follows the inputs' values."""
    from compatcheck.diagnose.pins import value_size

    found = value_size(ctx)
    if found is None:
        return []
    failing, output, dim, size, other = found
    artifact = BY_NAME[stage].artifact
    message = (f"{' and '.join(dict.fromkeys(d.rsplit(' = ', 1)[0] for d in serves))} is not pinned: {artifact} runs "
               f"at {', '.join(serves)} and matches eager there. What breaks it on input set {failing + 1} is a "
               f"value: there eager's {output} has size {size} in dim {dim}, and {other} at the same input sizes with "
               f"input set 1's values: a size computed from the inputs' values (int(index.max()) + 1, say), which "
               f"{artifact} keeps at input set 1's. Compute it outside the model and pass it in, or keep it a tensor")
    warned = next((stack for warning, stack in ctx.warnings if any(t in str(warning.message) for t in _TO_PYTHON)), [])
    kind = {"jit_trace": "frozen-constant", "export": "data-dependent-guard",
            "onnx_export": "data-dependent-guard"}.get(stage, "dynamic-shape")
    finding = finding_at(ctx.spec.user, stage, kind, message, location=ctx.spec.user.innermost(warned), stack=warned)
    finding.op = construct(finding.code) or f"{output}.shape[{dim}]"
    finding.checked_by = (f"the artifact, run on input set 1 at {', '.join(serves)} and at input set {failing + 1}'s "
                          "sizes with input set 1's values, matched eager each time")
    return [finding]


def error_findings(stage: str, ctx, error: BaseException | None) -> list:
    """Dynamic-shape findings for an export error that pinned a dynamic dimension, or whose guards do not
    hold for every size a declared dimension may take; [] for other errors."""
    dims = pinned_dims(error)
    if not dims:
        return violated_findings(stage, ctx, error)
    found = findings(stage, ctx, dims)
    for finding in found:
        finding.checked_by = finding.checked_by or "torch.export's error names the dim and the constant it pinned"
    return found


_VIOLATED = re.compile(r"Not all values of (\w+) = (\S+) in the specified range satisfy the generated guard (.+?)\.?$",
                       re.M)


def violated_findings(stage: str, ctx, error: BaseException | None) -> list:
    """A declared dynamic dim whose guard torch cannot prove for its whole range ('Constraints violated'):
    the code computes with the size in a way that holds only for some sizes (`round(x.shape[0] / 2)`).
    The guard's stack, from draft_export, gives the line."""
    user = ctx.spec.user
    by_dim: dict[tuple[str, str], list[str]] = {}
    for name, source, guard in _VIOLATED.findall(chain_text(error)):
        guard = re.sub(r"L\['(\w+)'\]\.size\(\)\[(\d+)\]", r"\1.shape[\2]", guard)
        said = by_dim.setdefault((name, dim_name(source)), [])
        if guard not in said:  # a restated error repeats the one it restates
            said.append(guard)
    result = []
    for (name, dim), said in by_dim.items():
        function = re.match(r"(\w+)\(", said[0])
        try:
            guards = [(expr, stack) for expr, symbols, stack in _guards(ctx) if dim in symbols.values()]
        except Exception:
            guards = []
        guards.sort(key=lambda g: not (function and function.group(1).lower() in g[0].lower()))
        stack = guards[0][1] if guards else []
        message = (f"{dim} is declared dynamic ({name}), but the code adds guards that do not hold for every size it "
                   f"may take: {'; '.join(said)}. Compute with the size in torch ops that hold for all sizes, or "
                   "narrow the dim's range (Dim(..., min=, max=)) to where they hold")
        finding = finding_at(user, stage, "dynamic-shape", message, location=user.innermost(stack) or call_into_children(ctx),
                               stack=stack)
        finding.op = function.group(1) if function else construct(finding.code)
        result.append(finding)
    return result
