"""Where an output differs: the indices of each dimension that hold differing values, and whether
they are exactly the zeros of an integer or bool input (an attention mask), which is what decides
whether a mismatch matters: padded positions are never read."""

from __future__ import annotations

import itertools

import numpy as np


def differing(expected: np.ndarray, actual: np.ndarray, atol: float, rtol: float) -> np.ndarray:
    """A bool array: True where |actual - expected| > atol + rtol·|expected| (NaN only where eager has NaN)."""
    expected = expected.astype(np.float64)
    actual = actual.astype(np.float64)
    close = np.isclose(actual, expected, atol=atol, rtol=rtol, equal_nan=True)
    return ~close


def _ranges(indices) -> str:
    """[0, 1, 2, 5] -> '0-2, 5'."""
    parts, run = [], []
    for index in indices:
        if run and index != run[-1] + 1:
            parts.append(run)
            run = []
        run.append(int(index))
    parts.append(run)
    return ", ".join(f"{r[0]}-{r[-1]}" if len(r) > 2 else ", ".join(map(str, r)) for r in parts if r)


def describe(bad: np.ndarray) -> str:
    """Which indices of which dims hold the differing values, naming only dims where not all do."""
    where = np.nonzero(bad)
    dims = []
    for dim, indices in enumerate(where):
        used = np.unique(indices)
        if len(used) < bad.shape[dim]:
            dims.append(f"dim {dim} {'index' if len(used) == 1 else 'indices'} {_ranges(used)} of {bad.shape[dim]}")
    share = f"{int(bad.sum())} of {bad.size} values"
    return f"{share}, at {'; '.join(dims)}" if dims else f"{share}, spread over every index of every dim"


def masked_by(bad: np.ndarray, inputs: dict[str, np.ndarray]) -> tuple[str, tuple[int, ...]] | None:
    """(input name, output dims it lines up with) when every differing value sits where a mask input
    (bool, or integers that are all 0 or 1) is 0, for a mask whose dims match output dims in order."""
    where = np.nonzero(bad)
    if not where or len(where[0]) == 0:
        return None
    for name, array in inputs.items():
        if array.dtype.kind not in "biu" or array.ndim == 0 or array.ndim > bad.ndim or array.all():
            continue
        if array.dtype.kind != "b" and not np.isin(array, (0, 1)).all():
            continue  # token ids and indices have zeros too, but they do not mask anything
        for dims in itertools.combinations(range(bad.ndim), array.ndim):
            if tuple(bad.shape[d] for d in dims) != array.shape:
                continue
            if not array[tuple(where[d] for d in dims)].any():
                return name, dims
    return None
