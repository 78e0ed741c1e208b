"""The 0/1 specialization: an artifact traced or exported from input set 1 (the sample) that has size 0
or 1 in a dimension the other input sets vary. torch.export and torch.jit.trace treat sizes 0 and 1
as constants, so the artifact only takes that size, however the dimension was declared; the fix is a
sample whose size there is at least 2."""

from __future__ import annotations

import ast
import re

from compatcheck.errors import chain_text
from compatcheck.report.model import Finding
from compatcheck.diagnose.found import finding_at


def _named_shapes(input_set) -> list[tuple[str, tuple[int, ...]]]:
    """(name, shape) per tensor of the input set, named by forward's parameters where known ('points',
    "batch['x']"), else by position ('input 2')."""
    names = input_set.names or []
    return [(names[i] if i < len(names) else f"input {i + 1}", tuple(leaf.shape))
            for i, leaf in enumerate(input_set.leaves())]


def _get_inputs_return(path) -> tuple[int, ast.Return, str] | None:
    """(line, the return statement, the file's text) of get_inputs() in the model file."""
    text = path.read_text()
    for node in ast.parse(text).body:
        if isinstance(node, ast.FunctionDef) and node.name == "get_inputs":
            returns = _own_returns(node)
            if returns:
                return returns[-1].lineno, returns[-1], text
    return None


def _own_returns(function: ast.FunctionDef) -> list[ast.Return]:
    """The function's own `return <value>` statements, by line: not those of a helper defined inside it."""
    found, todo = [], list(function.body)
    while todo:
        node = todo.pop()
        if isinstance(node, ast.Return) and node.value is not None:
            found.append(node)
        if not isinstance(node, (ast.FunctionDef, ast.AsyncFunctionDef, ast.Lambda, ast.ClassDef)):
            todo.extend(ast.iter_child_nodes(node))
    return sorted(found, key=lambda node: node.lineno)


def _reordered(statement: ast.Return, text: str, first: int, count: int) -> str | None:
    """`return [a, b]` with element `first` moved to the front, when the list literal is the input sets."""
    value = statement.value
    if not isinstance(value, ast.List) or len(value.elts) != count or statement.lineno != statement.end_lineno:
        return None
    parts = [ast.get_source_segment(text, element) for element in value.elts]
    parts.insert(0, parts.pop(first))
    return f"return [{', '.join(parts)}]"


# torch.export's own words when a dim declared dynamic had size 0 or 1 in the sample.
_EXPORT_SAID = re.compile(r"0/1 specialized due to hint of (\d) for dimension inputs(\S*?)\.shape\[(\d+)\]")
_TOP = re.compile(r"^\[(?:'([^']+)'|(\d+))\](.*)$")  # torch's "['points']", "[1]" or "['batch']['x']"


def _leaf(ctx, sample: list, path: str) -> int | None:
    """The index of the tensor torch's path names: by forward's parameter ("['points']"), or by position
    ("[1]", where the dynamic shapes are a tuple), as the input set names its tensors."""
    from compatcheck.spec import top_level

    top = _TOP.match(path)
    name = None
    if top:
        key, index, rest = top.groups()
        if index is not None:
            named = top_level(ctx.spec.input_sets[0], ctx.spec.signature)
            key = named[int(index)][0] if int(index) < len(named) else None
        name = key + rest if key else None
    found = next((i for i, (n, _) in enumerate(sample) if n == name), None)
    return 0 if found is None and len(sample) == 1 else found


def _said(ctx, error: BaseException | None) -> tuple[list, int] | None:
    """What export said it specialized to 0 or 1, as in `_pinned`, with the first input set that differs."""
    sets = [_named_shapes(one) for one in ctx.spec.input_sets]
    found = []
    for size, path, dim in _EXPORT_SAID.findall(chain_text(error)):
        leaf, dim, size = _leaf(ctx, sets[0], path), int(dim), int(size)
        if leaf is None:
            continue
        other = next((k for k, one in enumerate(sets) if one[leaf][1][dim] != size), None)
        if other is not None:
            found.append((leaf, dim, size, sets[other][leaf][1][dim], other))
    return ([f[:4] for f in found], found[0][4]) if found else None


def _pinned(ctx, error: BaseException | None) -> tuple[list, int] | None:
    """([(leaf, dim, size in the sample, size in the other set)], that other set's index), when the
    sample's size 0 or 1 is what broke the stage: export said so, or the artifact built from input set 1
    works on it and fails on a later set that has another size there."""
    if _EXPORT_SAID.search(chain_text(error)):
        return _said(ctx, error)
    results = ctx.input_results
    if not results or not results[0].ok:
        return None
    failing = next((r.index for r in results if not r.ok), None)
    if failing is None:
        return None
    sample = _named_shapes(ctx.spec.input_sets[0])
    other = _named_shapes(ctx.spec.input_sets[failing])
    pinned = [(leaf, dim, size, other[leaf][1][dim]) for leaf, (_, shape) in enumerate(sample)
              if leaf < len(other) and len(other[leaf][1]) == len(shape)
              for dim, size in enumerate(shape) if size in (0, 1) and other[leaf][1][dim] != size]
    return (pinned, failing) if pinned else None


def size_one_sample(stage: str, ctx, error: BaseException | None = None) -> Finding | None:
    """A finding when input set 1 (the sample) has size 0 or 1 in a dim another input set varies, and
    that is what broke the stage."""
    found = _pinned(ctx, error)
    if found is None:
        return None
    pinned, failing = found
    sample = _named_shapes(ctx.spec.input_sets[0])
    where = ", ".join(f"dim {dim} of {sample[leaf][0]}" for leaf, dim, _, _ in pinned)
    leaf, dim, size, wanted = pinned[0]
    message = (f"input set 1, the sample {stage} is built from, has size {size} in {where}, where input set "
               f"{failing + 1} has {wanted}: sizes 0 and 1 are special to export and tracing (torch.export "
               f"specializes them), so the artifact takes only size {size} there.")
    located = _get_inputs_return(ctx.spec.path)
    finding = finding_at(ctx.spec.user, stage, "dynamic-shape", message, op=SIZE_ONE,
                         location=(str(ctx.spec.path), located[0]) if located else None)
    finding.checked_by = ("torch.export's error names the dim it specialized" if _EXPORT_SAID.search(chain_text(error))
                          else f"the artifact ran on input set 1 and failed on input set {failing + 1}")
    return finding


SIZE_ONE = "size-1 sample"


def _candidates(sets: list, pinned: list) -> list[int]:
    """The input sets (past the first) with size 2 or more in every pinned dim; first those that have 2 or
    more in every dim the input sets vary, so that building from them pins no other dim."""
    shapes = [[shape for _, shape in _named_shapes(one)] for one in sets]

    def fits(k: int, places) -> bool:
        return all(leaf < len(shapes[k]) and dim < len(shapes[k][leaf]) and shapes[k][leaf][dim] >= 2
                   for leaf, dim in places)

    varying = [(leaf, dim) for leaf, shape in enumerate(shapes[0]) for dim in range(len(shape))
               if any(leaf < len(one) and len(one[leaf]) == len(shape) and one[leaf][dim] != shape[dim]
                      for one in shapes)]
    able = [k for k in range(1, len(sets)) if fits(k, [(leaf, dim) for leaf, dim, _, _ in pinned])]
    return sorted(able, key=lambda k: not fits(k, varying))


def sample_recipes(ctx, error: BaseException | None) -> list:
    """Building from each input set whose sizes are 2 or more there, when the sample's size 0 or 1 is what
    broke the stage (the likeliest first); [] otherwise, or when no input set has such sizes."""
    from compatcheck.recipes import Recipe

    found = _pinned(ctx, error)
    if found is None:
        return []
    return [Recipe(f"input set {k + 1} as the sample", sample=k) for k in _candidates(ctx.spec.input_sets, found[0])]


def _sets(numbers: list[int]) -> str:
    return f"input set{'s' if len(numbers) > 1 else ''} {', '.join(map(str, numbers))}"


def proven_order(ctx, finding: Finding, tried: list[tuple], others: list[Finding]) -> None:
    """The size-1 finding, told what building from each other input set with sizes 2 or more there gave
    (`tried`: (recipe, True / False / None when not tried)): the one that passed (then the reordered
    `return` of get_inputs() is its rewrite), those that failed, those not tried. Where one passed, the
    stage's findings in library code (`others`) are told the library is not the cause."""
    if not tried:
        finding.message += (f" No other of the {len(ctx.spec.input_sets)} input sets has size 2 or more there to "
                            "build from instead.")
        return
    failed = [r.sample + 1 for r, passed in tried if passed is False]
    unchecked = [r.sample + 1 for r, passed in tried if passed not in (True, False)]
    good = next((r.sample for r, passed in tried if passed is True), None)
    if good is None:
        if failed:
            finding.message += (f" Built from {_sets(failed)} instead, it fails too (checked): the sample's size "
                                "is not the only cause.")
        if unchecked:
            finding.message += (f" Building from {_sets(unchecked)} instead was not checked: the search was cut "
                                "short (--diagnose-budget).")
        finding.checked_by = f"built from {_sets(failed)}, run on every input set" if failed else finding.checked_by
        return
    also = f" (built from {_sets(failed)}, it fails too)" if failed else ""
    finding.message += f" Fix, checked: built from input set {good + 1}, it passes on every input set{also}."
    finding.checked_by = f"built from input set {good + 1}, run on every input set and every swept size"
    for other in others:
        if other.library_file:
            other.advice = (f"The cause is the sample's size, not the code of {other.library_file.split('/', 1)[0]}: "
                            f"built from input set {good + 1}, the stage passes (the dynamic-shape finding).")
    located = _get_inputs_return(ctx.spec.path)
    reordered = _reordered(located[1], located[2], good, len(ctx.spec.input_sets)) if located else None
    if reordered:
        finding.rewrite = f"# input set {good + 1} first: it is the sample every artifact is built from\n{reordered}"


def first_if_size_one(stage: str, ctx, findings: list[Finding], error: BaseException | None = None) -> list[Finding]:
    """The stage's findings, led by the 0/1-specialization one when that is what broke the stage."""
    found = size_one_sample(stage, ctx, error)
    return [found, *findings] if found is not None else findings
