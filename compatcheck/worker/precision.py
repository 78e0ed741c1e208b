"""With --dtype float16 or bfloat16: a passing stage's precision record, from its comparisons."""

from __future__ import annotations

from compatcheck.errors import one_line
from compatcheck.report.model import Precision
from compatcheck.stages.base import Stage, StageContext


def precision(ctx: StageContext, stage: Stage, leaves: list) -> Precision:
    """The stage's two measures in reduced precision (the rule itself is per element): its RMS error
    against the float64 run on the output where it is largest beside eager's own, and how far it moved
    from the float32 answers."""
    judged = [leaf for leaf in leaves if leaf.fp64_error is not None]
    worst = max(judged, key=lambda leaf: leaf.fp64_error / leaf.eager_fp64_error if leaf.eager_fp64_error else
                (float("inf") if leaf.fp64_error else 0.0), default=None)
    moved = [leaf.float32_error for leaf in leaves if leaf.float32_error is not None]
    try:
        upcast = stage.upcast(ctx)
    except Exception as exc:  # a note on the pass, not the verdict
        upcast = f"not known: {one_line(exc)}"
    return Precision(dtype=str(ctx.reduced).removeprefix("torch."), fp64_error=worst and worst.fp64_error,
                     eager_fp64_error=worst and worst.eager_fp64_error,
                     float32_error=max(moved) if moved else None, upcast=upcast)


def precision_reason(record: Precision) -> str:
    parts = []
    if record.fp64_error is not None:
        parts.append(f"{record.dtype}: every element within twice eager {record.dtype}'s distance to float64 at its "
                     f"magnitude; rms error to float64 {record.fp64_error:.1e} (eager's {record.eager_fp64_error:.1e})")
    if record.float32_error is not None:
        parts.append(f"{record.float32_error:.1e} from float32")
    if record.upcast:
        parts.append(record.upcast)
    return "; ".join(parts)
