"""What the installed torch can do, where releases differ: the one place that checks.

compatcheck installs beside any torch from 2.10 on, nightlies included. A stage that needs a feature
names it in `needs`, and where this torch lacks it the stage reports `skip` with the release that
brought it, never a crash or a verdict about the model. Features are probed, not read off the
version number, so a nightly that drops or renames one is caught too. Where a release spells
something differently, the function here that reads it knows both spellings.
"""

from __future__ import annotations

import importlib
import inspect
from collections.abc import Callable
from dataclasses import dataclass

import torch


@dataclass(frozen=True)
class Feature:
    name: str  # as the user would look it up
    since: str  # the first release that has it
    probe: Callable[[], bool]

    def present(self) -> bool:
        try:
            return bool(self.probe())
        except Exception:  # an API that moved raises on the probe: then it is not there as we use it
            return False


def _parameters(function) -> set[str]:
    return set(inspect.signature(function).parameters)


DYNAMO_EXPORTER = Feature("torch.onnx.export(dynamo=True, dynamic_shapes=...)", "2.5",
                          lambda: {"dynamo", "dynamic_shapes", "kwargs"} <= _parameters(torch.onnx.export))
LEGACY_EXPORTER = Feature("torch.onnx.export(dynamo=False, kwargs=...) (the TorchScript-based exporter)", "2.5",
                          lambda: {"dynamo", "kwargs"} <= _parameters(torch.onnx.export) and hasattr(torch.jit, "trace"))
DIM_DYNAMIC = Feature("torch.export.Dim.DYNAMIC", "2.6", lambda: hasattr(torch.export.Dim, "DYNAMIC"))
AOT_INDUCTOR = Feature("torch._inductor.aoti_compile_and_package", "2.6",
                       lambda: hasattr(importlib.import_module("torch._inductor"), "aoti_compile_and_package"))
TORCH_COMPILE = Feature("torch.compile", "2.0", lambda: callable(torch.compile))
COMPILER_STANCE = Feature("torch.compiler.set_stance('fail_on_recompile')", "2.6",
                          lambda: callable(torch.compiler.set_stance))
TORCHSCRIPT_SCRIPT = Feature("torch.jit.script", "1.0", lambda: callable(torch.jit.script))
TORCHSCRIPT_TRACE = Feature("torch.jit.trace", "1.0", lambda: callable(torch.jit.trace))


def missing(feature: Feature) -> str | None:
    """None when this torch has the feature, else the skip reason."""
    if feature.present():
        return None
    return f"needs torch ≥ {feature.since} with {feature.name}; this is torch {torch.__version__}"


def dynamic_dim(name: str):
    """A dimension torch.export must keep dynamic: Dim.DYNAMIC, or before it a named Dim, which
    torch.export likewise refuses to specialize."""
    from torch.export import Dim

    return Dim.DYNAMIC if DIM_DYNAMIC.present() else Dim(name)


def graph_break_type(error: BaseException) -> str | None:
    """The kind of a dynamo graph break ('Data-dependent branching'): the exception's `gb_type` where
    it has one (2.13 to 2.15 do), else the first line of its message, where torch 2.10 puts it."""
    found = getattr(error, "gb_type", None)
    if found:
        return found
    text = str(error).strip()
    if "Explanation:" not in text:
        return None  # an old-style message: its first line is the whole story, not a type
    return text.splitlines()[0].strip() or None
