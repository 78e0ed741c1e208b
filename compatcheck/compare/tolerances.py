"""The tolerance of each output leaf: per-output TOLERANCE > --atol/--rtol > the model's TOLERANCE > the
dtype's default. A tolerance the user set is a bound no float64 run widens or narrows; a per-output key
that names no output is the user's mistake, never silently dropped."""

from __future__ import annotations

import dataclasses
from dataclasses import dataclass

import torch

from compatcheck.errors import UsageError

# (atol, rtol) per dtype; looser than torch.testing's, which are meant for kernels, not whole models.
DEFAULT_TOLERANCES = {
    torch.float64: (1e-7, 1e-7),
    torch.float32: (1e-5, 1e-4),
    torch.float16: (1e-3, 1e-3),
    torch.bfloat16: (1e-2, 1.6e-2),
    torch.complex64: (1e-5, 1e-4),
    torch.complex128: (1e-7, 1e-7),
}
GLOBAL_KEYS = ("atol", "rtol")


@dataclass
class Tolerances:
    """Resolves the tolerance of one output leaf."""

    cli_atol: float | None = None
    cli_rtol: float | None = None
    model: dict = dataclasses.field(default_factory=dict)

    def resolve(self, name: str, dtype: torch.dtype) -> tuple[float, float]:
        atol, rtol = DEFAULT_TOLERANCES.get(dtype, (0.0, 0.0))
        atol = self.model.get("atol", atol)
        rtol = self.model.get("rtol", rtol)
        atol = atol if self.cli_atol is None else self.cli_atol
        rtol = rtol if self.cli_rtol is None else self.cli_rtol
        per_output = self._own(name)
        if per_output is not None:
            atol = per_output.get("atol", atol)
            rtol = per_output.get("rtol", rtol)
        return float(atol), float(rtol)

    def binding(self, name: str) -> bool:
        """Whether the user set this output's tolerance (--atol/--rtol or TOLERANCE): then it is a bound that
        no float64 run widens or narrows."""
        return (self.cli_atol is not None or self.cli_rtol is not None or "atol" in self.model
                or "rtol" in self.model or self._own(name) is not None)

    def _own(self, name: str) -> dict | None:
        """The per-output entry for leaf `name`: its own key, or a key naming it by its last parts (`probs`
        for `1.probs`); `check` has made sure each key names exactly one output."""
        if isinstance(self.model.get(name), dict):
            return self.model[name]
        return next((value for key, value in self.model.items() if isinstance(value, dict) and _names(key, name)),
                    None)

    def check(self, names: list[str]) -> None:
        """Every per-output key names exactly one of the outputs `names`; else a UsageError naming them."""
        for key, value in self.model.items():
            if key in GLOBAL_KEYS or not isinstance(value, dict):
                continue
            matches = [name for name in names if _names(key, name)]
            if len(matches) != 1:
                shown = ", ".join(names[:12]) + (", ..." if len(names) > 12 else "")
                said = "names no output" if not matches else f"names {len(matches)} outputs ({', '.join(matches[:4])})"
                raise UsageError(f"TOLERANCE[{key!r}] {said}; the outputs are: {shown}")


def _names(key: str, name: str) -> bool:
    """Whether a per-output TOLERANCE key names output leaf `name`: the whole name, or its last parts."""
    return name == key or name.endswith(f".{key}")
