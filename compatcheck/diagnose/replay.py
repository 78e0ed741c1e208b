"""What the harness found per input set, for findings that need the proof (a frozen trace, a
divergent ONNX graph)."""

from __future__ import annotations


def first_mismatch(ctx) -> int | None:
    """The first input set on which the stage's artifact differed from eager or raised, else None."""
    return next((one.index for one in ctx.input_results if not one.ok), None)


def first_value_mismatch(ctx) -> int | None:
    """The first input set on which an output's values differed from eager's (not its structure), else None."""
    return next((one.index for one in ctx.input_results if any(not leaf.ok for leaf in one.leaves)), None)


def as_eager(ctx, index: int, outputs) -> bool:
    """Whether `outputs` (a flat list, as an ONNX graph returns them) answer input set `index` as eager does,
    judged as the stage's run judges (the tolerances, eager's own run-to-run noise, then float64 where they
    differ; outputs that change with the seed or the clock not by value)."""
    from compatcheck.compare import compare_outputs

    leaves, _ = compare_outputs(ctx.reference[index], outputs, ctx.tolerances, flat=True,
                                noise=ctx.noise[index] if ctx.noise is not None else None,
                                fp64=lambda: ctx.fp64(index), values=ctx.unvalued(index, False))
    return bool(leaves) and all(leaf.ok for leaf in leaves)
