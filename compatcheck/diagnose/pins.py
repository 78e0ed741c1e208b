"""A "this dim is pinned" claim, checked before it is made: the stage's artifact runs on input set 1
resized along that dim alone (its tensors sliced or tiled, sweep.resize, so any size computed from their
values stays input set 1's) at the other sizes the input sets and the sweep have. Where it matches eager
at each, the dim is not pinned. What broke the artifact is then looked for in the values: at the failing
input set's sizes with input set 1's values the artifact matches eager, and eager's output has another
size there than on the failing set, a size computed from the inputs' values (`int(index.max()) + 1`)."""

from __future__ import annotations

import torch
from torch.utils import _pytree as pytree

from compatcheck.compare import compare_outputs
from compatcheck.sweep import groups, resize
from compatcheck.variation import SEEDS, reseed

TRIED = 3  # sizes tried per dim, at most: each is one run of eager and one of the artifact


def _matches(ctx, input_set) -> bool | None:
    """Whether the stage's artifact answers as eager does on `input_set`; None where that cannot be told
    (no artifact to run, eager refuses the input set)."""
    if ctx.runner is None:
        return None
    try:
        expected = ctx.first_calls([input_set])[0]
    except Exception:
        return None
    ctx.rewind()
    reseed(SEEDS[0])
    try:
        outputs = ctx.runner(input_set.copy())
    except Exception:
        return False
    leaves, structure = compare_outputs(expected, outputs, ctx.tolerances, flat=ctx.flat_outputs,
                                        fp64=lambda: ctx.float64(input_set))
    return all(leaf.ok for leaf in leaves) and bool(leaves or not structure)


def at_other_sizes(ctx, dim: str) -> tuple[list[str], bool] | None:
    """(the sizes tried, as 'x.shape[1] = 30'; whether the artifact matched eager at every one) for input
    set 1 with `dim` resized alone to the sizes the other input sets and the sweep have there; None where
    that could not be run."""
    group = next((one for one in groups(ctx.spec) if dim in one.dims), None)
    if group is None or ctx.runner is None:
        return None
    sample = ctx.spec.input_sets[0]
    own = group.size(sample)
    swept = [group.size(one.input_set) for one in ctx.swept.sets if set(one.dims) == set(group.dims)]
    sizes = [size for size in dict.fromkeys([*(group.size(s) for s in ctx.spec.input_sets), *swept, own + 1])
             if size != own and size >= 1][:TRIED]
    tried = []
    for size in sizes:
        matched = _matches(ctx, resize(sample, group, size))
        if matched is None:
            continue
        tried.append(f"{dim} = {size}")
        if not matched:
            return tried, False
    return (tried, True) if tried else None


def value_size(ctx) -> tuple[int, str, int, int, int] | None:
    """(the failing input set's index, an output, its dim, its size there, its size at the same input
    sizes with input set 1's values), when the artifact matches eager at those sizes with input set 1's
    values: a size that follows the inputs' values, not their sizes."""
    failing = next((result.index for result in ctx.input_results if not result.ok), None)
    if failing is None or failing < 1:
        return None
    sets = ctx.spec.input_sets
    made = sets[0]
    for group in groups(ctx.spec):
        made = resize(made, group, group.size(sets[failing]))
    if not _matches(ctx, made):
        return None
    there, here = (pytree.tree_flatten_with_path(out)[0] for out in (ctx.reference[failing],
                                                                      ctx.first_calls([made])[0]))
    for (path, a), (_, b) in zip(there, here):
        if isinstance(a, torch.Tensor) and isinstance(b, torch.Tensor) and a.dim() == b.dim():
            for dim, (size, other) in enumerate(zip(a.shape, b.shape)):
                if size != other:
                    return failing, f"output{pytree.keystr(path)}", dim, size, other
    return None
