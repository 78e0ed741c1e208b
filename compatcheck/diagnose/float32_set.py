"""The modules that must stay float32 for eager in float16/bfloat16 to give no NaN/Inf the float64 run does
not, found and proven (docs/precision.md).

A unit of the search is a window: modules one caller ran one after another (the blocks of an
nn.ModuleList, the children of a block), kept float32 together, so what passes between them stays
float32. Where trouble starts (a module whose values leave the range in the float32 run, or the module of
the first NaN/Inf) the window grows over its neighbours until values come in and go out within the
range, then one neighbour more, then a level up. Each try keeps the windows of every place of trouble
and runs the failing input sets; where NaN/Inf remain, the first op that gives them says where: a new
place of trouble, or a window to grow. What held is cut to a 1-minimal set of windows by delta
debugging, and proven on every input set by the very code the finding gives to paste.
"""

from __future__ import annotations

import time
from dataclasses import dataclass, field

import torch

from compatcheck.compare import flatten
from compatcheck.diagnose.found import finding_at, plain
from compatcheck.diagnose.non_finite import finite_where_float64_is, first_module
from compatcheck.report.model import Finding
from compatcheck.variation import SEEDS, reseed

SEARCH_BUDGET = 3.0  # the search may take this many float32 eager runs of every input set
# ...but at least this many seconds: for a model that runs in milliseconds, the clock measures the machine's
# load rather than the model, and one try (a copy, a cast, a run) costs about one float32 run.
SEARCH_FLOOR = 3.0  # 1s was cut short on a 2-core machine running two checks at once

# What the keep-float32 finding gives to paste, and what the search and the proof run: the same text.
KEEP_FLOAT32 = '''\
import torch
from torch.utils._pytree import tree_leaves, tree_map


def keep_float32(model, names, dtype):
    """`model` in `dtype`, but the modules in `names` compute in float32: what comes in as float16 or
    bfloat16 is cast to float32, and what goes out is cast back to it. A list in `names` is modules that
    run one after another, kept float32 together: what passes between them stays float32."""
    groups = [[name] if isinstance(name, str) else list(name) for name in names]
    every = [name for group in groups for name in group]
    groups = [[name for name in group if not any(name.startswith(other + ".") for other in every)]
              for group in groups]
    groups = [group for group in groups if group]
    kept = {name: {key: value.clone() for key, value in model.get_submodule(name).state_dict().items()}
            for group in groups for name in group}
    model.to(dtype)
    for group in groups:
        boundary = Float32Boundary()
        for position, name in enumerate(group):
            module = model.get_submodule(name).float()
            module.load_state_dict(kept[name])  # their float32 weights, not the dtype's rounding of them
            module.register_forward_pre_hook(boundary.enter if position else boundary.open, with_kwargs=True)
        model.get_submodule(group[-1]).register_forward_hook(boundary.leave)
    return model


class Float32Boundary:
    """The casts around modules kept in float32 together, back to the precision their inputs came in."""

    def __init__(self):
        self.came_in = None

    def open(self, module, args, kwargs):  # the first of them: what comes in says what to cast back to
        narrow = [value.dtype for value in tree_leaves((args, kwargs)) if _narrow(value)]
        self.came_in = narrow[0] if narrow else None
        return self.enter(module, args, kwargs)

    def enter(self, module, args, kwargs):
        return tree_map(lambda value: value.float() if _narrow(value) else value, (args, kwargs))

    def leave(self, module, args, output):
        return tree_map(_to(self.came_in), output) if self.came_in else None


def _narrow(value):
    return isinstance(value, torch.Tensor) and value.dtype in (torch.float16, torch.bfloat16)


def _to(dtype):
    return lambda value: value.to(dtype) if isinstance(value, torch.Tensor) and value.is_floating_point() else value
'''

Unit = tuple  # the names of modules one caller ran one after another, kept float32 together


@dataclass
class Calls:
    """What the float32 run saw: each module's caller (the module running when it was called; "" is the
    model's own forward), the modules each one called in the order they first ran, and per module the
    largest |x| of its floating inputs and outputs."""

    caller: dict[str, str]
    children: dict[str, list[str]]
    input_peak: dict[str, float]
    output_peak: dict[str, float]
    limit: float  # the dtype's largest finite value
    order: dict[str, int] = field(default_factory=dict)  # when each module first ran

    def window(self, node: str) -> tuple[int, int, bool]:
        """The positions among its caller's modules of the first and last module of the window around
        `node`, and whether values come into it and go out of it within the range."""
        siblings = self.children[self.caller[node]]
        first = last = siblings.index(node)
        while first > 0 and self.input_peak.get(siblings[first], 0.0) > self.limit:
            first -= 1
        while last < len(siblings) - 1 and self.output_peak.get(siblings[last], 0.0) > self.limit:
            last += 1
        fits = (self.input_peak.get(siblings[first], 0.0) <= self.limit and
                self.output_peak.get(siblings[last], 0.0) <= self.limit)
        return first, last, fits

    def ladder(self, anchor: str) -> list[Unit]:
        """The windows to keep for trouble that starts at `anchor`, smallest first: at each level from it
        up to the model's own modules, the window that takes and gives values within the range, then
        that window and one neighbour more on each side. A window of every module its caller ran is
        left to the level above, where it is the caller."""
        windows: list[Unit] = []
        node = anchor
        while node in self.caller:
            up = self.caller[node]
            siblings = self.children[up]
            first, last, fits = self.window(node)
            for start, end in ((first, last), (max(first - 1, 0), last + 1)):
                window = tuple(siblings[start:end + 1])
                whole = len(window) == len(siblings) and up != ""
                if (fits or up == "") and not whole and window not in windows:
                    windows.append(window)
            node = up
        return windows

    def merged(self, windows: list[Unit]) -> list[Unit]:
        """The windows as the units to keep: one whose modules all lie inside another's dropped, those of
        one caller that overlap or touch joined, in the order the modules ran."""
        names = {name for window in windows for name in window}
        spans: dict[str, list[list[int]]] = {}
        for window in windows:
            if all(_inside(name, names) for name in window):
                continue
            siblings = self.children[self.caller[window[0]]]
            spans.setdefault(self.caller[window[0]], []).append([siblings.index(window[0]),
                                                                 siblings.index(window[-1])])
        units = []
        for up, found in spans.items():
            joined: list[list[int]] = []
            for start, end in sorted(found):
                if joined and start <= joined[-1][1] + 1:
                    joined[-1][1] = max(joined[-1][1], end)
                else:
                    joined.append([start, end])
            units += [tuple(self.children[up][start:end + 1]) for start, end in joined]
        return sorted(units, key=lambda unit: self.order.get(unit[0], 0))


def _inside(name: str, names) -> bool:
    """Whether a module holding `name` (not `name` itself) is in `names`."""
    parts = name.split(".")
    return any(".".join(parts[:end]) in names for end in range(1, len(parts)))


def _covers(units: list[Unit], name: str) -> bool:
    return any(name in unit or _inside(name, set(unit)) for unit in units)


def spelled(units: list[Unit]) -> list:
    """The units as KEEP_FLOAT32 lists them: a name, or a list of names kept together."""
    return [unit[0] if len(unit) == 1 else list(unit) for unit in units]


def shown(units: list[Unit]) -> str:
    return ", ".join(unit[0] if len(unit) == 1 else f"[{', '.join(unit)}]" for unit in units)


def _distance(outputs, answer) -> float:
    """The largest finite |outputs - answer| over the floating outputs."""
    worst = 0.0
    for (_, mine), (_, theirs) in zip(flatten(outputs)[0], flatten(answer)[0]):
        if isinstance(mine, torch.Tensor) and mine.is_floating_point() and isinstance(theirs, torch.Tensor):
            diff = (mine.double() - theirs.double()).abs()
            diff = diff[torch.isfinite(diff)]
            worst = max(worst, float(diff.max()) if diff.numel() else 0.0)
    return worst


class Trials:
    """Runs the model with units kept float32, made by the pasteable code itself."""

    def __init__(self, ctx, sets: list[int]):
        self.ctx, self.sets = ctx, sets  # the input sets the search runs: those that give NaN/Inf
        namespace: dict = {}
        exec(compile(KEEP_FLOAT32, "<keep_float32>", "exec"), namespace)  # the very code the finding gives
        self.keep = namespace["keep_float32"]
        self.results: dict[tuple, tuple[bool, float]] = {}

    def kept(self, units: list[Unit]):
        return self.keep(self.ctx.spec.float32_model(), spelled(units), self.ctx.reduced)

    def holds(self, units: list[Unit]) -> bool:
        return self.run(units, self.sets)[0]

    def run(self, units: list[Unit], sets: list[int]) -> tuple[bool, float]:
        """Whether every output of those input sets is finite where float64's is, and the largest
        distance from the float32 answers; a model that raises with them kept does not hold."""
        key = (tuple(units), tuple(sets))
        if key not in self.results:
            try:
                self.results[key] = self._run(self.kept(units), sets)
            except Exception:
                self.results[key] = (False, 0.0)
        return self.results[key]

    def _run(self, model, sets: list[int]) -> tuple[bool, float]:
        inputs, moved = self.ctx.spec.input_sets, 0.0
        with torch.no_grad():
            for index in sets:
                reseed(SEEDS[0])
                outputs = model(*inputs[index].args, **inputs[index].kwargs)
                if not finite_where_float64_is(self.ctx, outputs, index):
                    return False, moved
                answer = self.ctx.float32(index)
                moved = moved if isinstance(answer, BaseException) else max(moved, _distance(outputs, answer))
        return True, moved

    def first_module(self, units: list[Unit]) -> str:
        """The module the first NaN/Inf comes from with those units kept; "" where none is known."""
        try:
            first = first_module(self.kept(units), self.ctx.spec.input_sets, self.sets)
        except Exception:
            return ""
        return first[0] if first else ""


def grow(calls: Calls, trials: Trials, anchors: list[str], out_of_time) -> tuple[list[Unit], str | None]:
    """Units that keep the failing input sets finite, and None; or the last units tried and why none held."""
    ladders = {anchor: ladder for anchor in anchors if (ladder := calls.ladder(anchor))}
    steps = dict.fromkeys(ladders, 0)
    units: list[Unit] = []
    while steps:
        units = calls.merged([ladders[anchor][step] for anchor, step in steps.items()])
        if trials.holds(units):
            return units, None
        if out_of_time():
            return units, "cut short"
        module = trials.first_module(units)
        if module in calls.caller and module not in ladders and not _covers(units, module):
            if ladder := calls.ladder(module):  # trouble in a place the float32 run did not show
                ladders[module], steps[module] = ladder, 0
                continue
        growing = [anchor for anchor in steps if _covers([ladders[anchor][steps[anchor]]], module)] or list(steps)
        growing = [anchor for anchor in growing if steps[anchor] + 1 < len(ladders[anchor])]
        if not growing:
            return units, "tried"
        for anchor in growing:
            steps[anchor] += 1
    return units, "nothing to try"


def ddmin(items: list, holds, out_of_time) -> tuple[list, bool]:
    """Zeller's delta debugging: a subset of `items` for which `holds` is true (it is for `items`) and
    false for every subset one item smaller; False with the smallest found so far when `out_of_time()`."""
    granularity = 2
    while len(items) >= 2:
        size = len(items) / granularity
        chunks = [items[round(i * size):round((i + 1) * size)] for i in range(granularity)]
        for chunk in chunks:
            if out_of_time():
                return items, False
            if holds(chunk):
                items, granularity = chunk, 2
                break
        else:
            for chunk in chunks if granularity > 2 else ():  # with two chunks the complements are the chunks
                complement = [item for item in items if item not in chunk]
                if out_of_time():
                    return items, False
                if holds(complement):
                    items, granularity = complement, max(granularity - 1, 2)
                    break
            else:
                if granularity >= len(items):
                    return items, True
                granularity = min(len(items), granularity * 2)
    return items, True


def _snippet(units: list[Unit], named: str) -> str:
    return (f"{KEEP_FLOAT32}\n\nKEEP_FLOAT32 = {spelled(units)!r}  # proven by compatcheck --dtype {named}\n"
            f"model = keep_float32(model, KEEP_FLOAT32, torch.{named})")


def float32_set(ctx, calls: Calls, anchors: list[str], failing: list[int]) -> Finding:
    """The keep-float32 finding: the units found and proven, or why there are none."""
    named = str(ctx.reduced).removeprefix("torch.")
    trials = Trials(ctx, failing)
    budget = max(SEARCH_BUDGET * ctx.float32_seconds, SEARCH_FLOOR)
    started = time.perf_counter()
    out_of_time = lambda: time.perf_counter() - started > budget  # noqa: E731
    units, missed = grow(calls, trials, anchors, out_of_time)
    if missed:
        return plain("eager", "keep-float32", (
            f"no set of modules in float32 found that keeps {named} finite: {_why_none(units, missed, budget)}; "
            "compute those lines in float32 (.float() on their inputs, a cast back after)"))
    found, minimal = ddmin(units, trials.holds, out_of_time)
    spent = time.perf_counter() - started
    proven, moved = trials.run(found, list(range(len(ctx.spec.input_sets))))
    if not proven:
        return plain("eager", "keep-float32", (
            f"keeping {shown(found)} in float32 keeps input set {failing[0] + 1} finite in {named} but not "
            "every input set: no set proven"), op=shown(found))
    why = (f"putting any one of them back into {named} brings NaN/Inf back" if minimal else
           f"not minimal: search cut short after {spent:.1f}s (budget {budget:.1f}s: 3 × the float32 run, at least "
           f"{SEARCH_FLOOR:g}s)")
    together = " (a bracketed list together: what passes between its modules stays float32)" if any(
        len(unit) > 1 for unit in found) else ""
    return finding_at(ctx.spec.user, "eager", "keep-float32", (
        f"keep {shown(found)} in float32{together} and the rest in {named}: proven on every input set, no NaN/Inf "
        f"where float64 has none, at most {moved:.2g} from the float32 answers; {why}"),
        location=ctx.spec.build_sites.get(found[0][0]), op=shown(found),
        rewrite=_snippet(found, named))


def _why_none(units: list[Unit], missed: str, budget: float) -> str:
    if missed == "nothing to try":
        return "no module leaves the range: the values leave it in forward code between modules"
    if missed == "cut short":
        return f"search cut short at its budget ({budget:.1f}s) with {shown(units)} in float32 still giving NaN/Inf"
    return f"keeping {shown(units)} in float32 still gives NaN/Inf"
