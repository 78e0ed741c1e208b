"""The precision pre-flight of --dtype float16/bfloat16, and the modules that must stay float32, proven.

1. Range: one float32 eager run with a forward hook on every module names each module whose outputs
   leave the dtype's range (any |x| above its largest finite value: Inf in the dtype) or fall into its
   subnormals (more than 1% of the non-zero outputs below its smallest normal number), at the line
   that built it; the same run records which module called which, in the order they ran.
2. The first op that gives NaN/Inf when the model runs in the dtype, at the user's line, with the
   module it ran in (only where eager in the dtype gives NaN/Inf, or a module leaves the range).
3. Where eager in the dtype gives NaN/Inf that the float64 run does not: the modules that must stay
   float32 (float32_set.py), from where 1 and 2 say the trouble starts.
Modules are named by their qualified names (blocks.2.up), inside nn.ModuleList, nn.Sequential and
nn.ModuleDict as anywhere else.
"""

from __future__ import annotations

import bisect

import torch

from compatcheck.diagnose.float32_set import Calls, float32_set
from compatcheck.diagnose.found import finding_at
from compatcheck.diagnose.non_finite import failing, first_non_finite, floating
from compatcheck.report.model import Finding
from compatcheck.variation import SEEDS, reseed

SUBNORMAL_SHARE = 0.01  # more of the non-zero outputs than this below the smallest normal number: flagged
def _named(dtype: torch.dtype) -> str:
    return str(dtype).removeprefix("torch.")


class _Range:
    """What one module's floating outputs (and inputs) held over the float32 run."""

    def __init__(self):
        self.peak = 0.0  # the largest finite |x| of its outputs
        self.input_peak = 0.0
        self.nonzero = 0
        self.subnormal = 0  # non-zero outputs below the dtype's smallest normal number


def _magnitudes(tensor):  # |x|, with NaN and Inf (already out of any range) as 0
    return torch.nan_to_num(tensor.detach().abs(), nan=0.0, posinf=0.0)


def _record(seen: _Range, args, output, tiny: float) -> None:
    for tensor in floating(output):
        size = _magnitudes(tensor)
        if size.numel():
            nonzero = int(torch.count_nonzero(size))
            seen.peak = max(seen.peak, float(size.max()))
            seen.nonzero += nonzero
            seen.subnormal += int(torch.count_nonzero(size < tiny)) - (size.numel() - nonzero)
    for tensor in floating(args):
        if tensor.numel():
            seen.input_peak = max(seen.input_peak, float(_magnitudes(tensor).max()))


def _ranges(ctx, info) -> tuple[dict[str, _Range], Calls]:
    """Per module name, what its outputs held in one float32 eager run of every input set; and which
    module called which (a container that never runs, like nn.ModuleList, calls nothing)."""
    model = ctx.spec.float32_model()
    found: dict[str, _Range] = {}
    calls = Calls({}, {"": []}, {}, {}, info.max)
    running: list[str] = []

    def enter(name):
        def hook(module, args):
            if name and name not in calls.caller:
                calls.order[name] = len(calls.order)
                calls.caller[name] = running[-1] if running else ""
                calls.children.setdefault(calls.caller[name], []).append(name)
                calls.children.setdefault(name, [])
            running.append(name)
        return hook

    def leave(name):
        def hook(module, args, output):
            running.pop()
            _record(found.setdefault(name, _Range()), args, output, info.tiny)
        return hook

    handles = []
    for name, module in model.named_modules():
        handles += [module.register_forward_pre_hook(enter(name)), module.register_forward_hook(leave(name))]
    try:
        with torch.no_grad():
            for given in ctx.spec.float32_inputs:
                one = given.copy()
                running.clear()
                reseed(SEEDS[0])
                model(*one.args, **one.kwargs)
    finally:
        for handle in handles:
            handle.remove()
    calls.input_peak = {name: seen.input_peak for name, seen in found.items()}
    calls.output_peak = {name: seen.peak for name, seen in found.items()}
    return found, calls


def _authors_float32(model) -> set[str]:
    """The modules (the model itself aside) the author keeps in float32 in a model they cast: those
    holding floating parameters, every one float32."""
    kept = set()
    for name, module in model.named_modules():
        floating_ = [p for p in module.parameters() if p.is_floating_point()]
        if name and floating_ and all(p.dtype == torch.float32 for p in floating_):
            kept.add(name)
    return kept


def _kept_float32(kept: set[str], name: str) -> bool:
    """Whether `name`, or a module holding it, is one the author keeps in float32."""
    parts = name.split(".") if name else []
    return any(".".join(parts[:end]) in kept for end in range(1, len(parts) + 1))


def _innermost(names: list[str]) -> list[str]:
    """The names none of whose submodules is in the list too: a container returns what its last child
    does, so the child is the one to name."""
    ordered = sorted(names)

    def holds_another(name):
        if name == "":
            return len(ordered) > 1
        at = bisect.bisect_left(ordered, name + ".")
        return at < len(ordered) and ordered[at].startswith(name + ".")

    return [name for name in names if not holds_another(name)]


def _module_finding(ctx, kind: str, name: str, message: str) -> Finding:
    module = ctx.spec.model.get_submodule(name)
    return finding_at(ctx.spec.user, "eager", kind, message, location=ctx.spec.build_sites.get(name),
                      op=type(module).__name__)


def _shown(ctx, name: str) -> str:
    """'module block.up (Linear)', or 'the model (Net)' for the model itself."""
    kind = type(ctx.spec.model.get_submodule(name)).__name__
    return f"module {name} ({kind})" if name else f"the model ({kind})"


def precision_findings(ctx) -> list[Finding]:
    """The pre-flight's findings on the eager stage, and the float32 set where eager in the dtype gives
    NaN/Inf that the float64 run does not."""
    info = torch.finfo(ctx.reduced)
    named = _named(ctx.reduced)
    seen, calls = _ranges(ctx, info)
    authors = _authors_float32(ctx.spec.model)
    ranges = {name: one for name, one in seen.items() if not _kept_float32(authors, name)}
    over = _innermost([name for name, one in ranges.items() if one.peak > info.max])
    findings = [_module_finding(ctx, "overflow", name, (
        f"{_shown(ctx, name)} outputs values up to {ranges[name].peak:.3g} in float32, beyond {named}'s largest "
        f"{info.max:g}: in {named} they are Inf")) for name in over]
    small = [name for name, one in ranges.items() if one.nonzero and one.subnormal > SUBNORMAL_SHARE * one.nonzero]
    for name in _innermost(small):
        one = ranges[name]
        findings.append(_module_finding(ctx, "subnormal", name, (
            f"{one.subnormal / one.nonzero:.1%} of the non-zero outputs of {_shown(ctx, name)} are below "
            f"{info.tiny:.2g}, {named}'s smallest normal number: in {named} they lose precision or become 0")))
    fails = failing(ctx)
    every = list(range(len(ctx.spec.input_sets)))
    first = first_non_finite(ctx.spec.pristine.copy(), ctx.spec.input_sets, every) if fails or over else None
    if first is not None:
        op, module, what, stack, index = first
        findings.append(finding_at(ctx.spec.user, "eager", "non-finite", (
            f"in {named}, {op} in {_shown(ctx, module)} is the first op to give {what} (input set {index + 1}), "
            f"from finite inputs"), op=op, stack=stack))
    if fails:
        anchors = _innermost([name for name, one in ranges.items() if name and max(one.peak, one.input_peak) >
                              info.max])
        anchors += [first[1]] if first is not None and first[1] not in anchors else []
        findings.append(float32_set(ctx, calls, anchors, fails))
    return findings
