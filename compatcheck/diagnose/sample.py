"""The 0/1 specialization: an artifact traced or exported from input set 1 (the sample) that has size 0
or 1 in a dimension the other input sets vary. torch.export and torch.jit.trace treat sizes 0 and 1
as constants, so the artifact only takes that size, however the dimension was declared; the fix is a
sample whose size there is at least 2."""

from __future__ import annotations

import ast

from torch.utils import _pytree as pytree

from compatcheck.report.model import Finding


def _named_shapes(input_set) -> list[tuple[str, tuple[int, ...]]]:
    flat, _ = pytree.tree_flatten_with_path((input_set.args, input_set.kwargs))
    names = []
    for path, leaf in flat:
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


def size_one_sample(stage: str, ctx) -> Finding | None:
    """A finding when the artifact works on input set 1 but not on a later one, and input set 1 has
    size 0 or 1 where that set has another size."""
    results = ctx.input_results
    if not results or not results[0].ok:
        return None
    failing = next((r.index for r in results if not r.ok), None)
    if failing is None:
        return None
    sets = ctx.spec.input_sets
    sample, other = _named_shapes(sets[0]), _named_shapes(sets[failing])
    pinned = [(leaf, dim, size, other[leaf][1][dim]) for leaf, (_, shape) in enumerate(sample)
              if leaf < len(other) and len(other[leaf][1]) == len(shape)
              for dim, size in enumerate(shape) if size in (0, 1) and other[leaf][1][dim] != size]
    if not pinned:
        return None
    good = next((k for k, s in enumerate(sets)
                 if all(len(_named_shapes(s)) > leaf and _named_shapes(s)[leaf][1][dim] >= 2
                        for leaf, dim, _, _ in pinned)), None)
    where = ", ".join(f"dim {dim} of {sample[leaf][0]}" for leaf, dim, _, _ in pinned)
    leaf, dim, size, wanted = pinned[0]
    fix = (f"trace and export with a sample whose size there is 2 or more: input set {good + 1} here"
           if good is not None else "trace and export with a sample whose size there is 2 or more (no input set "
                                    "has one)")
    message = (f"input set 1, the sample {stage} is built from, has size {size} in {where}, where input set "
               f"{failing + 1} has {wanted}: torch.export and torch.jit.trace specialize sizes 0 and 1, so the "
               f"artifact takes only size {size} there. Fix: {fix}.")
    located = _get_inputs_return(ctx.spec.path)
    finding = ctx.spec.user.finding(stage, "dynamic-shape", message, op="size-1 sample",
                                    location=(str(ctx.spec.path), located[0]) if located else None)
    if located and good is not None:
        reordered = _reordered(located[1], located[2], good, len(sets))
        if reordered:
            finding.rewrite = f"# input set {good + 1} first: it is the sample every artifact is built from\n{reordered}"
    return finding


def first_if_size_one(stage: str, ctx, findings: list[Finding]) -> list[Finding]:
    """The stage's findings, led by the 0/1-specialization one when that is what broke a later input set."""
    found = size_one_sample(stage, ctx)
    return [found, *findings] if found is not None else findings
