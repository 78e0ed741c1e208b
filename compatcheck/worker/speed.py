"""Deployment speed: how fast each passing artifact answers, per input set (`run --bench`).

Warm up, then time single calls in rounds until the median stops moving (two rounds in a row
within 2%) or the time budget is spent; report p50, p95 and throughput in samples per second.
"""

from __future__ import annotations

import statistics
import time

from compatcheck.ladder import REFERENCE
from compatcheck.report.model import Timing

WARMUP = 3
ROUND = 10
STABLE = 0.02


def _percentile(values: list[float], fraction: float) -> float:
    ordered = sorted(values)
    return ordered[min(len(ordered) - 1, int(round(fraction * (len(ordered) - 1))))]


def measure(label: str, run, input_set, index: int, budget: float) -> Timing:
    for _ in range(WARMUP):
        run(input_set)
    samples: list[float] = []
    medians: list[float] = []
    deadline = time.perf_counter() + budget
    while True:
        for _ in range(ROUND):
            started = time.perf_counter()
            run(input_set)
            samples.append(time.perf_counter() - started)
        medians.append(statistics.median(samples))
        stable = len(medians) >= 3 and all(
            abs(m - medians[-1]) <= STABLE * medians[-1] for m in medians[-3:-1])
        if stable or time.perf_counter() > deadline:
            break
    leaves = input_set.leaves()
    batch = leaves[0].shape[0] if leaves and leaves[0].dim() else 1
    p50 = statistics.median(samples)
    return Timing(label=label, input_set=index, iterations=len(samples), stable=stable,
                  p50_ms=p50 * 1e3, p95_ms=_percentile(samples, 0.95) * 1e3,
                  throughput=batch / p50 if p50 > 0 else None)


def add_speedups(stages) -> None:
    """Speed-up of every timing against eager's on the same input set."""
    eager = {t.input_set: t.p50_ms for s in stages if s.name == REFERENCE for t in s.timings}
    for stage in stages:
        for timing in stage.timings:
            base = eager.get(timing.input_set)
            timing.speedup_vs_eager = base / timing.p50_ms if base and timing.p50_ms else None
