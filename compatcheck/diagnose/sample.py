"""The 0/1 specialization: an artifact traced or exported from input set 1 (the sample) that has size 0
or 1 in a dimension the other input sets vary. torch.export and torch.jit.trace treat sizes 0 and 1
as constants, so the artifact only takes that size, however the dimension was declared; the fix is a
sample whose size there is at least 2."""

from __future__ import annotations

import ast
import re

from torch.utils import _pytree as pytree

from compatcheck.errors import chain_text
from compatcheck.report.model import Finding
from compatcheck.diagnose.found import finding_at


def _named_shapes(input_set) -> list[tuple[str, tuple[int, ...]]]:
    flat, _ = pytree.tree_flatten_with_path((input_set.args, input_set.kwargs))
    names = []
    for path, leaf in flat:
        if not hasattr(leaf, "shape"):
            continue  # a constant argument: it has no dims to specialize
        text = pytree.keystr(path)  # "[0][0]" for positional args, "[1]['input_ids']" for keyword ones
        names.append((text.split("'")[1] if "'" in text else f"input {len(names) + 1}", tuple(leaf.shape)))
    return names


def _get_inputs_return(path) -> tuple[int, ast.Return, str] | None:
    """(line, the return statement, the file's text) of get_inputs() in the model file."""
    text = path.read_text()
    for node in ast.parse(text).body:
        if isinstance(node, ast.FunctionDef) and node.name == "get_inputs":
            returns = [n for n in ast.walk(node) if isinstance(n, ast.Return) and n.value is not None]
            if returns:
                return returns[-1].lineno, returns[-1], text
    return None


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


def _pinned(ctx, error: BaseException | None) -> tuple[list, int] | None:
    """([(leaf, dim, size in the sample, size in the other set)], that other set's index), when the
    sample's size 0 or 1 is what broke the stage: export said so, or the artifact built from input set 1
    works on it and fails on a later set that has another size there."""
    sets = ctx.spec.input_sets
    sample = _named_shapes(sets[0])
    said = [m.groups() for m in _EXPORT_SAID.finditer(chain_text(error))]
    if said:
        found = []
        for size, path, dim in said:
            name = path.split("'")[1] if "'" in path else None
            leaf = next((i for i, (n, _) in enumerate(sample) if n == name), None)
            if leaf is None and len(sample) == 1:
                leaf = 0
            if leaf is not None:
                other = next((k for k, s in enumerate(sets) if _named_shapes(s)[leaf][1][int(dim)] != int(size)), None)
                if other is not None:
                    found.append((leaf, int(dim), int(size), _named_shapes(sets[other])[leaf][1][int(dim)], other))
        return ([f[:4] for f in found], found[0][4]) if found else None
    results = ctx.input_results
    if not results or not results[0].ok:
        return None
    failing = next((r.index for r in results if not r.ok), None)
    if failing is None:
        return None
    other = _named_shapes(sets[failing])
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
    return finding_at(ctx.spec.user, stage, "dynamic-shape", message, op=SIZE_ONE,
                                 location=(str(ctx.spec.path), located[0]) if located else None)


SIZE_ONE = "size-1 sample"


def sample_recipe(ctx, error: BaseException | None):
    """Building from the first input set whose sizes are 2 or more there, when the sample's size 0 or 1 is
    what broke the stage; None otherwise."""
    from compatcheck.recipes import Recipe

    found = _pinned(ctx, error)
    if found is None:
        return None
    pinned, _ = found
    sets = ctx.spec.input_sets
    good = next((k for k, s in enumerate(sets)
                 if all(len(_named_shapes(s)) > leaf and _named_shapes(s)[leaf][1][dim] >= 2
                        for leaf, dim, _, _ in pinned)), None)
    return Recipe(f"input set {good + 1} as the sample", sample=good) if good else None


def proven_order(ctx, finding: Finding, recipe, passed: bool | None) -> None:
    """The size-1 finding, told what building from `recipe`'s sample gave: it passed (then the reordered
    `return` of get_inputs() is its rewrite), it failed, or it was not tried (None)."""
    if recipe is None:
        finding.message += " No input set has size 2 or more there to build from instead."
        return
    good = recipe.sample
    if passed is None:
        finding.message += (f" Building from input set {good + 1} instead was not checked: the search was cut short "
                            "(--diagnose-budget).")
        return
    if not passed:
        finding.message += (f" Built from input set {good + 1} instead, it fails too (checked): the sample's size is "
                            "not the only cause.")
        return
    finding.message += f" Fix, checked: built from input set {good + 1}, it passes on every input set."
    located = _get_inputs_return(ctx.spec.path)
    reordered = _reordered(located[1], located[2], good, len(ctx.spec.input_sets)) if located else None
    if reordered:
        finding.rewrite = f"# input set {good + 1} first: it is the sample every artifact is built from\n{reordered}"


def first_if_size_one(stage: str, ctx, findings: list[Finding], error: BaseException | None = None) -> list[Finding]:
    """The stage's findings, led by the 0/1-specialization one when that is what broke the stage."""
    found = size_one_sample(stage, ctx, error)
    return [found, *findings] if found is not None else findings
