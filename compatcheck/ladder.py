"""The ladder: every stage, in order, and the deployment routes they make up.

Each stage is one module under compatcheck/stages; adding one is a file plus a row of LADDER (and a
row of ROUTES only if it opens a route). The tables hold no stage code, so the parent process can
order and select stages without torch.
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
    artifact: str  # what it makes, in words: "the trace", for findings about what that artifact keeps
    reference: bool = False  # the stage every other is compared with
    # Its build may compile with inductor: it runs after its lane's other stages, which run beside
    # inductor's one-time CPU probe (worker/inductor.py); Stage.inductor says whether this run's does.
    inductor: bool = False


LADDER = (
    Entry("eager", "compatcheck.stages.eager:Eager", (), "the model as written, run twice", "torchscript", 0,
          "the model", reference=True),
    Entry("compile", "compatcheck.stages.compile:Compile", (), "torch.compile(fullgraph=False)", "compile", 3,
          "the compiled model", inductor=True),
    Entry("compile_fullgraph", "compatcheck.stages.compile:CompileFullgraph", (), "torch.compile(fullgraph=True)",
          "compile", 1, "the compiled graph", inductor=True),
    # export shares the onnx lane: onnx_export translates its program instead of exporting again.
    Entry("export", "compatcheck.stages.export:Export", (), "torch.export, saved and reloaded", "onnx", 1,
          "the exported program"),
    Entry("aot_inductor", "compatcheck.stages.aot_inductor:AotInductor", ("export",),
          "the exported program compiled by AOTInductor into a .pt2 package", "onnx", 4, "the AOTInductor package",
          inductor=True),
    Entry("jit_script", "compatcheck.stages.jit_script:JitScript", (), "torch.jit.script, saved and reloaded",
          "torchscript", 1, "the scripted model"),
    Entry("jit_trace", "compatcheck.stages.jit_trace:JitTrace", (), "torch.jit.trace on input set 1, saved and reloaded",
          "torchscript", 1, "the trace"),
    Entry("onnx_export", "compatcheck.stages.onnx_export:OnnxExport", (), "torch.onnx.export + onnx.checker (full)",
          "onnx", 2, "the exported program"),
    Entry("onnxruntime", "compatcheck.stages.onnxruntime:OnnxRuntime", ("onnx_export",), "the ONNX file in onnxruntime",
          "onnx", 1, "the ONNX graph"),
    Entry("triton", "compatcheck.stages.triton:Triton", ("onnx_export",), "the ONNX file served by Triton, HTTP and gRPC",
          "onnx", 1, "the served model"),
    Entry("openvino", "compatcheck.stages.openvino:OpenVino", (),
          "openvino.convert_model, saved as IR and compiled for the CPU plugin, at its defaults", "openvino", 1,
          "the OpenVINO model"),
)
NAMES = tuple(entry.name for entry in LADDER)
BY_NAME = {entry.name: entry for entry in LADDER}
REFERENCE = next(entry.name for entry in LADDER if entry.reference)


@dataclass(frozen=True)
class Route:
    name: str  # as the report shows it
    key: str  # as assert_deployable(targets=...) names it
    stages: tuple[str, ...]  # in order: the first makes what the others deploy
    target: str  # the stage assert_deployable asks to pass (with every stage it requires)
    optional: tuple[str, ...] = ()  # stages whose failure only warns: the route works without them


ROUTES = (
    Route("torch.compile", "compile", ("compile", "compile_fullgraph"), "compile", optional=("compile_fullgraph",)),
    Route("TorchScript (script)", "torchscript", ("jit_script",), "jit_script"),
    Route("TorchScript (trace)", "trace", ("jit_trace",), "jit_trace"),
    Route("torch.export → AOTInductor", "aoti", ("export", "aot_inductor"), "aot_inductor"),
    Route("ONNX → onnxruntime → Triton", "onnx", ("onnx_export", "onnxruntime", "triton"), "onnxruntime"),
    Route("OpenVINO", "openvino", ("openvino",), "openvino"),
)
ROUTE = {route.key: route for route in ROUTES}


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


def lanes(names: list[str], jobs: int) -> list[list[str]]:
    """Split stages into at most `jobs` lists that can run side by side, each in the order it runs:
    ladder order, the stages that compile with inductor last (Entry.inductor).

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
    order = {name: (BY_NAME[name].inductor, i) for i, name in enumerate(NAMES)}
    return [sorted(b, key=order.__getitem__) for b in bins if b]
