"""Running an artifact on one input set, or one swept size, and comparing it with eager: the unit of
evidence every stage gathers the same way (worker/phases.py runs it per input set).

For a model random by design or reading the clock it also runs the artifact again under the other
seed (or with the clock moved), and says which outputs were compared by value.
"""

from __future__ import annotations

import time

import torch

from compatcheck.compare import compare_outputs, flatten
from compatcheck.diagnose.variation import lost, what_varies
from compatcheck.errors import one_line
from compatcheck.report.model import InputSetResult
from compatcheck.stages.base import NotSwept, Stage, identical
from compatcheck.variation import SEEDS, reseed, clock_moved

# What the model's code may raise: sys.exit() and KeyboardInterrupt too (the worker has its own
# session, so no Ctrl-C reaches it), which would otherwise end the worker and read as a crash.
MODEL_ERRORS = (Exception, SystemExit, KeyboardInterrupt)


def run_input_set(ctx, runner, index, input_set, stage: Stage, raised: list | None = None) -> InputSetResult:
    """Run `stage`'s artifact on one input set and compare its outputs with eager's; what it raises goes
    into `raised`."""
    started = time.perf_counter()
    ctx.rewind()  # a first call, as eager's reference was, where forward keeps state
    reseed(SEEDS[0])  # as eager's reference run was
    try:
        outputs = runner(input_set)
    except MODEL_ERRORS as exc:
        if raised is not None:
            raised.append(exc)
        return InputSetResult(index=index, ok=False, error=one_line(exc, 400),
                              seconds=round(time.perf_counter() - started, 4))
    seconds = round(time.perf_counter() - started, 4)
    noise = ctx.noise[index] if ctx.noise is not None else None
    leaves, structure = compare_outputs(
        ctx.reference[index], outputs, ctx.tolerances, flat=stage.flat_outputs, noise=noise,
        fp64=lambda: ctx.fp64(index), values=ctx.unvalued(index, stage.same_random),
        drawn=set(ctx.varies.random_leaves[index]) if ctx.varies.random else set(),
        float32=(lambda: ctx.float32(index)) if ctx.reduced else None,
    )
    ok = all(leaf.ok for leaf in leaves) and bool(leaves or not structure)
    if ok and ctx.varies:
        ok, structure = _varies_too(ctx, runner, input_set, outputs, structure, raised)
    return InputSetResult(index=index, ok=ok, structure=structure, seconds=seconds, leaves=leaves)


def run_swept(ctx, runner, swept, flat: bool) -> InputSetResult:
    """Run the artifact on one swept input set and compare with eager's outputs on it."""
    result = _run_swept(ctx, runner, swept, flat)
    result.dims = list(swept.dims)
    return result


def _run_swept(ctx, runner, swept, flat: bool) -> InputSetResult:
    """Run the artifact on one swept input set and compare with eager's outputs on it."""
    started = time.perf_counter()
    ctx.rewind()
    reseed(SEEDS[0])
    try:
        outputs = runner(swept.input_set.copy())
    except NotSwept:
        raise
    except MODEL_ERRORS as exc:
        return InputSetResult(index=-1, label=swept.label, ok=False, error=one_line(exc, 400),
                              seconds=round(time.perf_counter() - started, 4))
    seconds = round(time.perf_counter() - started, 4)
    leaves, structure = compare_outputs(swept.reference, outputs, ctx.tolerances, flat=flat,
                                        fp64=lambda: ctx.float64(swept.input_set))
    ok = all(leaf.ok for leaf in leaves) and bool(leaves or not structure)
    return InputSetResult(index=-1, label=swept.label, ok=ok, structure=structure, seconds=seconds, leaves=leaves)


def not_compared(ctx, stage: Stage) -> str:
    """The reason of a pass for a model whose outputs change by design: which were compared, which not."""
    names = [name for name, _ in flatten(ctx.reference[0])[0]]
    unvalued = ctx.unvalued(0, stage.same_random)
    if not unvalued:
        return f"{what_varies(ctx)}: compared under eager's seed, whose numbers the artifact draws; they vary here too"
    skipped = [f"output {names[i]}" for i in sorted(unvalued) if i < len(names)]
    compared = [f"output {name}" for i, name in enumerate(names) if i not in unvalued]
    return (f"values of {', '.join(skipped[:4])}{', ...' if len(skipped) > 4 else ''} not compared: {what_varies(ctx)}; "
            f"they vary here too" + (f"; {', '.join(compared[:4])} compared by value" if compared else ""))


def _varies_too(ctx, runner, input_set, outputs, structure, raised) -> tuple[bool, str | None]:
    """For a model random by design (or reading the clock): run the artifact again under the other seed
    (or with the clock moved); its outputs must change too."""
    ctx.rewind()
    try:
        if ctx.varies.random:
            reseed(SEEDS[1])
            again = runner(input_set.copy())
        else:
            with clock_moved():
                reseed(SEEDS[0])
                again = runner(input_set.copy())
    except MODEL_ERRORS as exc:
        if raised is not None:
            raised.append(exc)
        return False, f"running it again under another {'seed' if ctx.varies.random else 'clock'} raised {one_line(exc)}"
    if identical(outputs, again):
        return False, lost(ctx)
    return True, structure
