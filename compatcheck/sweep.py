"""Shapes beyond the samples: input sets of sizes the user never gave, made from their own samples.

An export that works at batch 2 and 5 may break at batch 1 or 7, and a dimension baked in by
`x.shape[0]` shows up only at a size no sample had. Along each dynamic dimension (given or inferred)
the sweep makes input sets of batch 1 and of an odd batch larger than any sample, and for any other
dynamic dimension (a sequence length) one shorter and one longer than the samples. They are made by
slicing and tiling the samples, never from fresh random values, so token ids, masks and indices stay
valid. A dimension grows only as far as eager takes it: where eager fails at a longer length (a
positional table's end), bisection between the longest sample and the size that failed finds the cap,
and the sweep stays within it. Every artifact is then run on the swept sets and compared with eager.
"""

from __future__ import annotations

import time
from dataclasses import dataclass, field

import torch

from compatcheck.spec import InputSet, dynamic_dims


@dataclass(frozen=True)
class Group:
    """Dimensions of the tensors of an input set that always have the same size: one dynamic dimension
    seen from every input that has it (input_ids and attention_mask share the batch and the length)."""

    places: tuple[tuple[int, int], ...]  # (tensor index in InputSet.leaves(), dim)
    name: str  # as the user reads it: 'batch' or 'input_ids.shape[1]'
    dims: tuple[str, ...]  # each place as torch names it in guards: 'x.shape[0]'

    def size(self, one: InputSet) -> int:
        leaf, dim = self.places[0]
        return one.leaves()[leaf].shape[dim]


@dataclass
class Swept:
    label: str  # "batch 7", "input_ids.shape[1] = 3"
    input_set: InputSet
    reference: object = None  # eager's outputs on it
    dims: tuple[str, ...] = ()  # the dimensions it resized, as torch names them


@dataclass
class Sweep:
    sets: list[Swept] = field(default_factory=list)
    caps: dict[str, int] = field(default_factory=dict)  # group name -> the largest size eager takes
    seconds: float = 0.0
    cut_short: bool = False  # the budget ran out before every size was made


def groups(spec) -> list[Group]:
    """The dynamic dimensions, grouped across tensors by their sizes in every input set; dim 0 groups
    are the batch."""
    sets = spec.input_sets
    leaves = [one.leaves() for one in sets]
    names = sets[0].names or [f"input {i}" for i in range(len(leaves[0]))]
    by_sizes: dict[tuple, list[tuple[int, int]]] = {}
    for leaf, dims in enumerate(dynamic_dims(spec)):
        for dim in sorted(dims):
            sizes = tuple(one[leaf].shape[dim] for one in leaves)
            by_sizes.setdefault((dim == 0, sizes), []).append((leaf, dim))
    found = []
    for (batch, _), places in by_sizes.items():
        leaf, dim = places[0]
        found.append(Group(tuple(places), "batch" if batch else f"{names[leaf]}.shape[{dim}]",
                           tuple(f"{names[i]}.shape[{d}]" for i, d in places)))
    return found


def resize(one: InputSet, group: Group, size: int) -> InputSet:
    """The input set with every dimension of `group` at `size`: its first entries, or the sample tiled."""
    tensors = one.leaves()
    changed = dict.fromkeys(range(len(tensors)))
    for leaf, dim in group.places:
        tensor = changed[leaf] if changed[leaf] is not None else tensors[leaf]
        have = tensor.shape[dim]
        if size > have:
            tensor = torch.cat([tensor] * -(-size // have), dim=dim)
        changed[leaf] = tensor.narrow(dim, 0, size).clone()
    replacements = iter([changed[i] if changed[i] is not None else t for i, t in enumerate(tensors)])
    return one.map(lambda _: next(replacements))


def _sizes(group: Group, seen: list[int]) -> list[int]:
    """The sizes to try: batch 1 and an odd batch above every sample; a length shorter and one longer."""
    largest, smallest = max(seen), min(seen)
    if group.name == "batch":
        above = largest + 1 if largest % 2 == 0 else largest + 2
        wanted = [1, above]
    else:
        wanted = [smallest - 1, largest + max(1, largest // 2)]
    return [size for size in dict.fromkeys(wanted) if size >= 1 and size not in seen]


def _runs(run, one: InputSet) -> bool:
    try:
        run(one)
        return True
    except Exception:
        return False


def build(spec, run, budget: float) -> Sweep:
    """The swept input sets and eager's outputs on them; `run(input_set)` runs eager. A length is made
    only as long as eager takes it: eager is tried at 4x the longest sample, and where it fails there,
    bisection finds the cap. A size eager fails at otherwise is left out."""
    started = time.perf_counter()
    sweep = Sweep()
    sets = spec.input_sets
    for group in groups(spec):
        seen = [group.size(one) for one in sets]
        base = sets[seen.index(max(seen))]  # the largest sample: slices of it hold real data throughout
        sizes = _sizes(group, seen)
        if group.name != "batch" and time.perf_counter() - started <= budget:
            if not _runs(run, resize(base, group, 4 * max(seen))):
                sweep.caps[group.name] = _cap(base, group, max(seen), 4 * max(seen), run)
                sizes = [min(size, sweep.caps[group.name]) for size in sizes]
        for size in dict.fromkeys(size for size in sizes if size not in seen):
            if time.perf_counter() - started > budget:
                sweep.cut_short = True
                break
            made = resize(base, group, size)
            try:
                sweep.sets.append(Swept(_label(group, size), made, run(made), group.dims))
            except Exception:
                continue  # eager itself does not take this size: nothing to hold an artifact to
    sweep.seconds = round(time.perf_counter() - started, 3)
    return sweep


def _cap(base: InputSet, group: Group, works: int, fails: int, run) -> int:
    """The largest size in [works, fails) at which eager runs, by bisection."""
    while fails - works > 1:
        middle = (works + fails) // 2
        if _runs(run, resize(base, group, middle)):
            works = middle
        else:
            fails = middle
    return works


def _label(group: Group, size: int) -> str:
    return f"batch {size}" if group.name == "batch" else f"{group.name} = {size}"
