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
    lane: str  # stages of one lane share caches or artifacts, so they run in the same worker
    weight: int  # rough relative cost, to balance lanes under --jobs


LADDER = (
    Entry("eager", "compatcheck.stages.eager:Eager", (), "the model as written, run twice", "torchscript", 0),
    Entry("compile", "compatcheck.stages.compile:Compile", (), "torch.compile(fullgraph=False)", "compile", 3),
    Entry("compile_fullgraph", "compatcheck.stages.compile:CompileFullgraph", (), "torch.compile(fullgraph=True)",
          "compile", 1),
    # export shares the onnx lane: onnx_export translates its program instead of exporting again.
    Entry("export", "compatcheck.stages.export:Export", (), "torch.export, saved and reloaded", "onnx", 1),
    Entry("aot_inductor", "compatcheck.stages.aot_inductor:AotInductor", ("export",),
          "the exported program compiled by AOTInductor into a .pt2 package", "onnx", 4),
    Entry("jit_script", "compatcheck.stages.jit_script:JitScript", (), "torch.jit.script, saved and reloaded",
          "torchscript", 1),
    Entry("jit_trace", "compatcheck.stages.jit_trace:JitTrace", (), "torch.jit.trace on input set 1, saved and reloaded",
          "torchscript", 1),
    Entry("onnx_export", "compatcheck.stages.onnx_export:OnnxExport", (), "torch.onnx.export + onnx.checker (full)",
          "onnx", 2),
    Entry("onnxruntime", "compatcheck.stages.onnxruntime:OnnxRuntime", ("onnx_export",), "the ONNX file in onnxruntime",
          "onnx", 1),
    Entry("triton", "compatcheck.stages.triton:Triton", ("onnx_export",), "the ONNX file served by Triton, HTTP and gRPC",
          "onnx", 1),
)
NAMES = tuple(entry.name for entry in LADDER)
BY_NAME = {entry.name: entry for entry in LADDER}
# A deployment route by name, as the stage its artifact is deployed from; select() adds what it requires.
ROUTES = {"onnx": ("onnxruntime",), "torchscript": ("jit_script",)}


def select(only: list[str] | None, skip: list[str] | None) -> list[str]:
    """Stage names to run in ladder order: `only` (or all) minus `skip`, plus what they require.

    eager always runs: it is the reference every other stage is compared with.
    """
    from compatcheck.errors import UsageError

    if only is not None and not only:
        raise UsageError(f"--stages names no stage; stages are: {', '.join(NAMES)}")
    for name in (only or []) + (skip or []):
        if name not in BY_NAME:
            raise UsageError(f"unknown stage {name!r}; stages are: {', '.join(NAMES)}")
    wanted = set(only or NAMES) - set(skip or [])
    for name in list(wanted):
        wanted.update(BY_NAME[name].requires)
    wanted.add("eager")
    return [name for name in NAMES if name in wanted]


def missing_artifact(needed: str, status: str | None, blocker: str | None = None) -> str:
    """The skip reason of a stage whose required stage left no artifact, naming what blocked it."""
    because = f"{status or 'not run'}: {blocker}" if blocker else status or "not run"
    return f"needs the artifact of {needed}, which did not produce one ({because})"


def blocker(findings: list) -> str | None:
    """A stage's first finding in a few words, for the skip reasons of the stages that needed it:
    'dynamic-shape at model.py:12'."""
    if not findings:
        return None
    first = findings[0]
    at = f" at {first.file}:{first.line}" if first.file and first.line else ""
    return f"{first.kind}{at}"


def lanes(names: list[str], jobs: int) -> list[list[str]]:
    """Split stages into at most `jobs` lists that can run side by side, each in ladder order.

    Stages of one lane stay together; lanes are spread over workers heaviest first.
    """
    groups: dict[str, list[str]] = {}
    for name in names:
        groups.setdefault(BY_NAME[name].lane, []).append(name)
    bins: list[list[str]] = [[] for _ in range(max(1, min(jobs, len(groups))))]
    load = [0] * len(bins)
    for group in sorted(groups.values(), key=lambda g: -sum(BY_NAME[n].weight for n in g)):
        target = load.index(min(load))
        bins[target].extend(group)
        load[target] += sum(BY_NAME[n].weight for n in group)
    order = {name: i for i, name in enumerate(NAMES)}
    return [sorted(b, key=order.__getitem__) for b in bins if b]
