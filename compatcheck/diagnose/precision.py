"""The precision pre-flight of --dtype float16/bfloat16, and the modules that must stay float32, proven.

1. Range: one float32 eager run with a forward hook on every module names each module whose outputs
   leave the dtype's range (any |x| above its largest finite value: Inf in the dtype) or fall into its
   subnormals (more than 1% of the non-zero outputs below its smallest normal number), at the line
   that built it.
2. The first op that gives NaN/Inf when the model runs in the dtype, at the user's line, with the
   module it ran in (only where eager in the dtype gives NaN/Inf, or a module leaves the range).
3. Where eager in the dtype gives NaN/Inf that the float64 run does not: a 1-minimal set of modules
   that must stay float32, by delta debugging over the modules of 1 and 2 (and the modules around
   them), within 3 × the float32 eager run; proven by a final run of every input set with exactly
   those modules in float32, made by the code the finding gives to paste.
"""

from __future__ import annotations

import time
import traceback

import torch
from torch.utils import _pytree as pytree
from torch.utils._python_dispatch import TorchDispatchMode

from compatcheck.compare import flatten
from compatcheck.diagnose.found import finding_at
from compatcheck.report.model import Finding
from compatcheck.variation import SEEDS

SUBNORMAL_SHARE = 0.01  # more of the non-zero outputs than this below the smallest normal number: flagged
SEARCH_BUDGET = 3.0  # the search may take this many float32 eager runs of every input set
# ...but at least this many seconds: for a model that runs in milliseconds, the clock measures the machine's
# load rather than the model, and one try (a copy, a cast, a run) costs about one float32 run.
SEARCH_FLOOR = 1.0

# What the keep-float32 finding gives to paste, and what the search and the proof run: the same text.
KEEP_FLOAT32 = '''\
import torch
from torch.utils._pytree import tree_leaves, tree_map


def keep_float32(model, names, dtype):
    """`model` in `dtype`, but the modules in `names` compute in float32: what comes in as float16 or
    bfloat16 is cast to float32, and what goes out is cast back to it."""
    names = [name for name in names if not any(name.startswith(other + ".") for other in names)]
    kept = {name: {key: value.clone() for key, value in model.get_submodule(name).state_dict().items()}
            for name in names}
    model.to(dtype)
    for name in names:
        module = model.get_submodule(name).float()
        module.load_state_dict(kept[name])  # their float32 weights, not the dtype's rounding of them
        boundary = Float32Boundary()
        module.register_forward_pre_hook(boundary.enter, with_kwargs=True)
        module.register_forward_hook(boundary.leave)
    return model


class Float32Boundary:
    """The casts around a module kept in float32, back to the precision its inputs came in."""

    def __init__(self):
        self.came_in = None

    def enter(self, module, args, kwargs):
        narrow = [value.dtype for value in tree_leaves((args, kwargs))
                  if isinstance(value, torch.Tensor) and value.dtype in (torch.float16, torch.bfloat16)]
        self.came_in = narrow[0] if narrow else None
        return tree_map(_to(torch.float32), (args, kwargs)) if self.came_in else None

    def leave(self, module, args, output):
        return tree_map(_to(self.came_in), output) if self.came_in else None


def _to(dtype):
    return lambda value: value.to(dtype) if isinstance(value, torch.Tensor) and value.is_floating_point() else value
'''


def _named(dtype: torch.dtype) -> str:
    return str(dtype).removeprefix("torch.")


def _floating(value) -> list[torch.Tensor]:
    return [leaf for leaf in pytree.tree_leaves(value) if isinstance(leaf, torch.Tensor) and leaf.is_floating_point()]


class _Range:
    """What one module's floating outputs (and inputs) held over the float32 run."""

    def __init__(self):
        self.peak = 0.0  # the largest finite |x| of its outputs
        self.input_peak = 0.0
        self.nonzero = 0
        self.subnormal = 0  # non-zero outputs below the dtype's smallest normal number


def _ranges(ctx, tiny: float) -> dict[str, _Range]:
    """Per module name, what its outputs held in one float32 eager run of every input set."""
    model = ctx.spec.float32_model()
    found: dict[str, _Range] = {}

    def magnitudes(tensor):  # |x|, with NaN and Inf (already out of any range) as 0
        return torch.nan_to_num(tensor.detach().abs(), nan=0.0, posinf=0.0)

    def hook(name):
        def record(module, args, output):
            seen = found.setdefault(name, _Range())
            for tensor in _floating(output):
                size = magnitudes(tensor)
                if size.numel():
                    nonzero = int(torch.count_nonzero(size))
                    seen.peak = max(seen.peak, float(size.max()))
                    seen.nonzero += nonzero
                    seen.subnormal += int(torch.count_nonzero(size < tiny)) - (size.numel() - nonzero)
            for tensor in _floating(args):
                if tensor.numel():
                    seen.input_peak = max(seen.input_peak, float(magnitudes(tensor).max()))
        return record

    handles = [module.register_forward_hook(hook(name)) for name, module in model.named_modules()]
    try:
        with torch.no_grad():
            for given in ctx.spec.float32_inputs:
                one = given.copy()
                torch.manual_seed(SEEDS[0])
                model(*one.args, **one.kwargs)
    finally:
        for handle in handles:
            handle.remove()
    return found


def _kept_float32(model, name: str) -> bool:
    """Whether the author keeps the module in float32 in a model they cast: it, or a module holding it,
    has float32 parameters only (the model itself aside)."""
    parts = name.split(".") if name else []
    for end in range(1, len(parts) + 1):
        floating = [p for p in model.get_submodule(".".join(parts[:end])).parameters() if p.is_floating_point()]
        if floating and all(p.dtype == torch.float32 for p in floating):
            return True
    return False


def _innermost(names: list[str]) -> list[str]:
    """The names none of whose submodules is in the list too: a container returns what its last child
    does, so the child is the one to name."""
    return [name for name in names if not any(other != name and (name == "" or other.startswith(name + "."))
                                              for other in names)]


def _module_finding(ctx, kind: str, name: str, message: str) -> Finding:
    module = ctx.spec.model.get_submodule(name)
    return finding_at(ctx.spec.user, "eager", kind, message, location=ctx.spec.build_sites.get(name),
                                 op=type(module).__name__)


def _shown(ctx, name: str) -> str:
    """'module block.up (Linear)', or 'the model (Net)' for the model itself."""
    kind = type(ctx.spec.model.get_submodule(name)).__name__
    return f"module {name} ({kind})" if name else f"the model ({kind})"


class _FirstNonFinite(TorchDispatchMode):
    """Records the first op whose floating outputs hold NaN/Inf while its floating inputs were finite,
    with the stack and the module it ran in."""

    def __init__(self, modules: list[str]):
        super().__init__()
        self.modules = modules  # the stack of modules running now, outermost first
        self.found: tuple | None = None

    def __torch_dispatch__(self, func, types, args=(), kwargs=None):
        out = func(*args, **(kwargs or {}))
        if self.found is None:
            outputs = _floating(out)
            if any(not bool(torch.isfinite(t).all()) for t in outputs) and all(
                    bool(torch.isfinite(t).all()) for t in _floating((args, kwargs))):
                nan = any(bool(torch.isnan(t).any()) for t in outputs)
                self.found = (f"aten.{func.overloadpacket.__name__}", self.modules[-1] if self.modules else "",
                              "NaN" if nan else "Inf", traceback.extract_stack()[:-1])
        return out


def _first_non_finite(ctx) -> tuple | None:
    """(op, module, 'NaN' or 'Inf', stack, input set) of the first op that gives NaN/Inf with the model in
    the dtype, on the first input set where one does; None where none does."""
    model = ctx.spec.pristine.copy()
    running: list[str] = []

    def enter(name):
        def hook(module, args):
            running.append(name)
        return hook

    def leave(module, args, output):
        running.pop()

    handles = []
    for name, module in model.named_modules():
        handles += [module.register_forward_pre_hook(enter(name)), module.register_forward_hook(leave)]
    try:
        with torch.no_grad():
            for index, one in enumerate(ctx.spec.input_sets):
                mode = _FirstNonFinite(running)
                torch.manual_seed(SEEDS[0])
                with mode:
                    model(*one.args, **one.kwargs)
                running.clear()
                if mode.found:
                    return (*mode.found, index)
    finally:
        for handle in handles:
            handle.remove()
    return None


def _finite_where_float64_is(ctx, outputs, index: int) -> bool:
    """Every floating output is finite wherever the float64 run's is (the float32 answers' where the
    model refuses float64)."""
    truth = ctx.fp64(index)
    if isinstance(truth, BaseException):
        truth = ctx.float32(index)
    got = [leaf for _, leaf in flatten(outputs)[0]]
    want = [leaf for _, leaf in flatten(truth)[0]] if not isinstance(truth, BaseException) else []
    for position, mine in enumerate(got):
        if not (isinstance(mine, torch.Tensor) and mine.is_floating_point()):
            continue
        theirs = want[position] if position < len(want) else None
        finite = torch.isfinite(theirs) if isinstance(theirs, torch.Tensor) and theirs.shape == mine.shape else \
            torch.ones_like(mine, dtype=torch.bool)
        if bool((finite & ~torch.isfinite(mine)).any()):
            return False
    return True


def _fails(ctx) -> list[int]:
    """The input sets where eager in the dtype gives NaN/Inf that the float64 run does not."""
    return [index for index, outputs in enumerate(ctx.reference) if not _finite_where_float64_is(ctx, outputs, index)]


def _distance(outputs, answer) -> float:
    """The largest finite |outputs - answer| over the floating outputs."""
    worst = 0.0
    for (_, mine), (_, theirs) in zip(flatten(outputs)[0], flatten(answer)[0]):
        if isinstance(mine, torch.Tensor) and mine.is_floating_point() and isinstance(theirs, torch.Tensor):
            diff = (mine.double() - theirs.double()).abs()
            diff = diff[torch.isfinite(diff)]
            worst = max(worst, float(diff.max()) if diff.numel() else 0.0)
    return worst


class _Search:
    """Runs the model with a set of modules kept float32, made by the pasteable code itself."""

    def __init__(self, ctx, sets: list[int]):
        self.ctx, self.sets = ctx, sets  # the input sets the search runs: those that give NaN/Inf
        namespace: dict = {}
        exec(compile(KEEP_FLOAT32, "<keep_float32>", "exec"), namespace)  # the very code the finding gives
        self.keep = namespace["keep_float32"]
        self.results: dict[frozenset, bool] = {}

    def holds(self, names: list[str]) -> bool:
        key = frozenset(names)
        if key not in self.results:
            self.results[key] = self.run(names, self.sets)[0]
        return self.results[key]

    def run(self, names: list[str], sets: list[int]) -> tuple[bool, float]:
        """Whether every output of those input sets is finite where float64's is, and the largest
        distance from the float32 answers."""
        model = self.keep(self.ctx.spec.float32_model(), list(names), self.ctx.reduced)
        inputs, moved = self.ctx.spec.input_sets, 0.0
        with torch.no_grad():
            for index in sets:
                torch.manual_seed(SEEDS[0])
                outputs = model(*inputs[index].args, **inputs[index].kwargs)
                if not _finite_where_float64_is(self.ctx, outputs, index):
                    return False, moved
                answer = self.ctx.float32(index)
                moved = moved if isinstance(answer, BaseException) else max(moved, _distance(outputs, answer))
        return True, moved


def ddmin(items: list[str], holds, out_of_time) -> tuple[list[str], bool]:
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


def _around(model, names: list[str]) -> list[str]:
    """The modules named and those that hold them (not the model itself), in the model's order."""
    wanted = set()
    for name in names:
        parts = name.split(".") if name else []
        wanted.update(".".join(parts[:end]) for end in range(1, len(parts) + 1))
    return [name for name, _ in model.named_modules() if name in wanted]


def _snippet(names: list[str], dtype: torch.dtype) -> str:
    return (f"{KEEP_FLOAT32}\n\nKEEP_FLOAT32 = {names!r}  # proven by compatcheck --dtype {_named(dtype)}\n"
            f"model = keep_float32(model, KEEP_FLOAT32, torch.{_named(dtype)})")


def precision_findings(ctx) -> list[Finding]:
    """The pre-flight's findings on the eager stage, and the float32 set where eager in the dtype gives
    NaN/Inf that the float64 run does not."""
    dtype = ctx.reduced
    info = torch.finfo(dtype)
    named = _named(dtype)
    ranges = {name: seen for name, seen in _ranges(ctx, info.tiny).items() if not _kept_float32(ctx.spec.model, name)}
    over = [name for name, seen in ranges.items() if seen.peak > info.max]
    findings = []
    for name in _innermost(over):
        findings.append(_module_finding(ctx, "overflow", name, (
            f"{_shown(ctx, name)} outputs values up to "
            f"{ranges[name].peak:.3g} in float32, beyond {named}'s largest {info.max:g}: in {named} they are Inf")))
    small = [name for name, seen in ranges.items()
             if seen.nonzero and seen.subnormal > SUBNORMAL_SHARE * seen.nonzero]
    for name in _innermost(small):
        seen = ranges[name]
        findings.append(_module_finding(ctx, "subnormal", name, (
            f"{seen.subnormal / seen.nonzero:.1%} of the non-zero outputs of {_shown(ctx, name)} are below "
            f"{info.tiny:.2g}, {named}'s smallest "
            f"normal number: in {named} they lose precision or become 0")))
    failing = _fails(ctx)
    first = _first_non_finite(ctx) if failing or over else None
    if first is not None:
        op, module, what, stack, index = first
        findings.append(finding_at(ctx.spec.user, "eager", "non-finite", (
            f"in {named}, {op} in {_shown(ctx, module)} is the first op to give {what} (input set {index + 1}), "
            f"from finite inputs"), op=op, stack=stack))
    if failing:
        candidates = [name for name, seen in ranges.items() if name and (seen.peak > info.max or
                                                                        seen.input_peak > info.max)]
        if first is not None and first[1]:
            candidates.append(first[1])
        findings.append(_float32_set(ctx, _around(ctx.spec.model, candidates), failing))
    return findings


def _float32_set(ctx, candidates: list[str], failing: list[int]) -> Finding:
    """The keep-float32 finding: the set found and proven, or why there is none."""
    named = _named(ctx.reduced)
    search = _Search(ctx, failing)
    budget = max(SEARCH_BUDGET * ctx.float32_seconds, SEARCH_FLOOR)
    started = time.perf_counter()
    if not candidates or not search.holds(candidates):
        tried = (f"keeping {', '.join(candidates)} in float32 still gives NaN/Inf" if candidates else
                 "no module leaves the range: the values leave it in forward code between modules")
        return Finding(stage="eager", kind="keep-float32", message=(
            f"no set of modules in float32 found that keeps {named} finite: {tried}; compute those lines in "
            "float32 (.float() on their inputs, a cast back after)"))
    found, minimal = ddmin(candidates, search.holds, lambda: time.perf_counter() - started > budget)
    spent = time.perf_counter() - started
    proven, moved = search.run(found, list(range(len(ctx.spec.input_sets))))
    if not proven:
        return Finding(stage="eager", kind="keep-float32", op=", ".join(found), message=(
            f"keeping {', '.join(found)} in float32 keeps input set {failing[0] + 1} finite in {named} but not "
            "every input set: no set proven"))
    why = (f"putting any one of them back into {named} brings NaN/Inf back" if minimal else
           f"not minimal: search cut short after {spent:.1f}s (budget {budget:.1f}s: 3 × the float32 run, at least "
           f"{SEARCH_FLOOR:g}s)")
    finding = _module_finding(ctx, "keep-float32", found[0], (
        f"keep {', '.join(found)} in float32 and the rest in {named}: proven on every input set, no NaN/Inf where "
        f"float64 has none, at most {moved:.2g} from the float32 answers; {why}"))
    finding.op = ", ".join(found)
    finding.rewrite = _snippet(found, ctx.reduced)
    return finding
