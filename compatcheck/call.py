"""`compatcheck.Call(*args, **kwargs)`: an input set that calls the model with positional and keyword
arguments together, e.g. `Call(x, y, mask=m)` for `model(x, y, mask=m)`. A tuple is positional
arguments and a dict keyword arguments, as before; Call is for the mix. Imports nothing, so a model
file or a test can use it without loading torch through compatcheck."""

from __future__ import annotations


class Call:
    __slots__ = ("args", "kwargs")

    def __init__(self, *args, **kwargs):
        self.args = args
        self.kwargs = kwargs

    def __repr__(self) -> str:
        parts = [f"<{type(a).__name__}>" for a in self.args] + [f"{k}=<{type(v).__name__}>" for k, v in self.kwargs.items()]
        return f"Call({', '.join(parts)})"
