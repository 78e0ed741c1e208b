"""The ladder. Each stage is one module under compatcheck/stages; adding one is a file plus a row here.

The table holds no stage code, so the parent process can order and select stages without torch.
"""

from __future__ import annotations

from dataclasses import dataclass


@dataclass(frozen=True)
class Entry:
    name: str
    target: str  # "module:Class", imported only in the worker
    requires: tuple[str, ...]  # stages whose artifacts this one consumes
    summary: str


LADDER = (
    Entry("eager", "compatcheck.stages.eager:Eager", (), "the model as written, run twice"),
    Entry("compile", "compatcheck.stages.compile:Compile", (), "torch.compile(fullgraph=False)"),
    Entry("compile_fullgraph", "compatcheck.stages.compile:CompileFullgraph", (), "torch.compile(fullgraph=True)"),
    Entry("jit_script", "compatcheck.stages.jit_script:JitScript", (), "torch.jit.script, saved and reloaded"),
    Entry("jit_trace", "compatcheck.stages.jit_trace:JitTrace", (), "torch.jit.trace on input set 1, saved and reloaded"),
    Entry("onnx_export", "compatcheck.stages.onnx_export:OnnxExport", (), "torch.onnx.export + onnx.checker (full)"),
    Entry("onnxruntime", "compatcheck.stages.onnxruntime:OnnxRuntime", ("onnx_export",), "the ONNX file in onnxruntime"),
    Entry("triton", "compatcheck.stages.triton:Triton", ("onnx_export",), "the ONNX file served by Triton, HTTP and gRPC"),
)
NAMES = tuple(entry.name for entry in LADDER)
BY_NAME = {entry.name: entry for entry in LADDER}


def select(only: list[str] | None, skip: list[str] | None) -> list[str]:
    """Stage names to run in ladder order: `only` (or all) minus `skip`, plus what they require.

    eager always runs: it is the reference every other stage is compared with.
    """
    from compatcheck.errors import UsageError

    for name in (only or []) + (skip or []):
        if name not in BY_NAME:
            raise UsageError(f"unknown stage {name!r}; stages are: {', '.join(NAMES)}")
    wanted = set(only or NAMES) - set(skip or [])
    for name in list(wanted):
        wanted.update(BY_NAME[name].requires)
    wanted.add("eager")
    return [name for name in NAMES if name in wanted]


def load(name: str):
    import importlib

    module, _, cls = BY_NAME[name].target.partition(":")
    return getattr(importlib.import_module(module), cls)()
