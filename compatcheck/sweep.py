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


def resize(one: InputSet, group: Group, size: int, fresh: bool = False) -> InputSet:
    """The input set with every dimension of `group` at `size`: its first entries, or the sample tiled;
    with `fresh`, new values drawn like the sample's wherever the size grows (see `drawn_like`)."""
    tensors = one.leaves()
    changed = dict.fromkeys(range(len(tensors)))
    generator = torch.Generator().manual_seed(size)
    for leaf, dim in group.places:
        tensor = changed[leaf] if changed[leaf] is not None else tensors[leaf]
        have = tensor.shape[dim]
        if size > have:
            tiled = torch.cat([tensor] * -(-size // have), dim=dim).narrow(dim, 0, size)
            tensor = drawn_like(tensor, tiled, dim, generator) if fresh else tiled
        changed[leaf] = tensor.narrow(dim, 0, size).clone()
    replacements = iter([changed[i] if changed[i] is not None else t for i, t in enumerate(tensors)])
    return one.map(lambda _: next(replacements))


def drawn_like(sample: torch.Tensor, tiled: torch.Tensor, dim: int, generator: torch.Generator) -> torch.Tensor:
    """Values for `tiled`'s shape drawn like `sample`'s: floats from a normal of the sample's mean and spread,
    kept within its range (and sorted along `dim` where the sample is); integers uniform within its range.
    Masks and flags (bool, or integers of two values) keep the sample's pattern, tiled: a tiled copy repeats
    what the sample computes (its maximum, its sums), fresh values do not."""
    values = sample.detach()
    if values.numel() == 0 or values.dtype == torch.bool or values.is_complex() or values.unique().numel() <= 2:
        return tiled
    low, high = values.min(), values.max()
    if values.is_floating_point():
        spread = values.double().std() if values.numel() > 1 else torch.tensor(0.0, dtype=torch.float64)
        made = torch.randn(tiled.shape, generator=generator, dtype=torch.float64) * spread + values.double().mean()
        # A draw outside the range is drawn again, uniformly within it: clamping would pile values on the bounds.
        within = low.double() + (high - low).double() * torch.rand(tiled.shape, generator=generator, dtype=torch.float64)
        made = torch.where((made < low) | (made > high), within, made).to(values.dtype)
    else:
        made = torch.randint(int(low), int(high) + 1, tiled.shape, generator=generator).to(values.dtype)
    if values.shape[dim] > 1 and bool((values.diff(dim=dim) >= 0).all()):
        made = made.sort(dim=dim).values
    return made.to(values.device).requires_grad_(values.requires_grad and values.is_floating_point())


def _sizes(group: Group, seen: list[int], bounds: tuple[int, int] | None, constants: list[int], cap: int) -> list[int]:
    """The sizes to try: batch 1 and an odd batch above every sample, or a length shorter and one longer;
    the declared bounds; each constant the code compares the dimension with and the size past it. None
    above `cap` (the cost cap) or outside the declared bounds."""
    largest, smallest = max(seen), min(seen)
    if group.name == "batch":
        above = largest + 1 if largest % 2 == 0 else largest + 2
        wanted = [1, above]
    else:
        wanted = [smallest - 1, largest + max(1, largest // 2)]
    low, high = bounds or (1, MAX_SIZE)
    wanted += ([low, high] if bounds else []) + [size for constant in constants for size in (constant, constant + 1)]
    return [size for size in dict.fromkeys(wanted) if max(low, 1) <= size <= min(high, cap) and size not in seen]


def _runs(run, one: InputSet) -> bool:
    try:
        run(one.copy())
        return True
    except Exception:
        return False


def build(spec, run, budget: float, constants: dict[str, list[int]] | None = None) -> Sweep:
    """The swept input sets and eager's outputs on them; `run(input_set)` runs eager; `constants`: per
    dimension ('x.shape[1]'), the sizes the code compares it with. A length is made only as long as eager
    takes it: eager is tried at the longest size wanted (at least 4x the longest sample), and where it
    fails there, bisection finds the cap. Each size has fresh values where eager takes them, else the
    sample tiled; a size eager fails at either way is left out."""
    started = time.perf_counter()
    sweep = Sweep()
    sets = spec.input_sets
    declared = declared_bounds(spec)
    for group in groups(spec):
        seen = [group.size(one) for one in sets]
        base = sets[seen.index(max(seen))]  # the largest sample: slices of it hold real data throughout
        bounds = next((declared[d] for d in group.dims if d in declared), None)
        cap = max(max(seen), MAX_ELEMENTS * max(seen) // max(1, sum(t.numel() for t in base.leaves())))
        sizes = _sizes(group, seen, bounds, [c for d in group.dims for c in (constants or {}).get(d, ())], cap)
        longest = max([4 * max(seen), *sizes])
        if group.name != "batch" and time.perf_counter() - started <= budget and longest <= cap:
            if not _runs(run, resize(base, group, longest)):
                sweep.caps[group.name] = _cap(base, group, max(seen), longest, run)
                sizes = [min(size, sweep.caps[group.name]) for size in sizes]
        for size in dict.fromkeys(size for size in sizes if size not in seen):
            if time.perf_counter() - started > budget:
                sweep.cut_short = True
                break
            made = _made(base, group, size, run)
            if made is not None:
                sweep.sets.append(Swept(_label(group, size), *made, group.dims))
    sweep.seconds = round(time.perf_counter() - started, 3)
    return sweep


# The cost cap: a swept input set holds at most this many elements (or the largest sample's size).
MAX_ELEMENTS = 1 << 22
MAX_SIZE = 1 << 31


def _made(base: InputSet, group: Group, size: int, run):
    """(the input set at `size`, eager's outputs on it): fresh values first, else the sample tiled."""
    for fresh in (True, False):
        made = resize(base, group, size, fresh=fresh)
        try:
            return made, run(made.copy())  # a forward that writes into its input must not change the set kept
        except Exception:
            continue  # eager itself does not take these values or this size
    return None


def declared_bounds(spec) -> dict[str, tuple[int, int]]:
    """{'x.shape[1]': (min, max)} for each dimension get_dynamic_shapes() declares with a bounded Dim."""
    from compatcheck.spec import declared_per_input

    if spec.dynamic_shapes is None or spec.dynamic_shapes_inferred:
        return {}
    found = {}
    for name, _, dims in declared_per_input(spec):
        for index, dim in (dims.items() if isinstance(dims, dict) else ()):
            low, high = getattr(dim, "min", None), getattr(dim, "max", None)
            if isinstance(low, int) or isinstance(high, int):
                found[f"{name}.shape[{index}]"] = (low if isinstance(low, int) else 1,
                                                   high if isinstance(high, int) and high < MAX_SIZE else MAX_SIZE)
    return found


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
