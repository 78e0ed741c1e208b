"""onnxruntime's graph optimizer as the suspect: where the stage's session (every optimization on, as
a deployer gets it by default) does not answer as eager does, the same graph runs again in sessions
at each lower level. The highest level at which every input set answers as eager does is the one that
avoids the difference; the level above it brings it, and the nodes its optimized graph has that the
lower one's lacks (read from optimized_model_filepath) are the fusions that do."""

from __future__ import annotations

import tempfile
from dataclasses import dataclass, field
from pathlib import Path

from compatcheck.diagnose.replay import as_eager
from compatcheck.onnxruntime_session import feeds, session_options

# onnxruntime's levels from none to all; the stage's own session runs at the last, the default.
LEVELS = ("ORT_DISABLE_ALL", "ORT_ENABLE_BASIC", "ORT_ENABLE_EXTENDED", "ORT_ENABLE_ALL")


@dataclass
class OptimizerSaid:
    avoids: str | None = None  # the highest lower level at which every input set answers as eager does
    brings: str | None = None  # the level above it, at which the difference comes
    fused: list[str] = field(default_factory=list)  # nodes `brings` makes that `avoids` does not: 'Op (domain)'
    tried: list[str] = field(default_factory=list)  # each lower level run, and what it gave, in words


def _session(path: str, providers: list[str], level: str, folder: Path):
    import onnxruntime

    options = session_options(graph_optimization_level=getattr(onnxruntime.GraphOptimizationLevel, level),
                              optimized_model_filepath=str(folder / f"{level}.onnx"))
    return onnxruntime.InferenceSession(path, options, providers=providers)


def _answers(ctx, path: str, providers: list[str], level: str, folder: Path, order: list[int]) -> str | None:
    """What keeps a session at `level` from answering every input set, in `order`, as eager does, in words;
    None where it answers every one."""
    try:
        session = _session(path, providers, level, folder)
    except Exception as exc:  # a level that cannot load the graph does not avoid anything
        return f"the session does not load ({type(exc).__name__})"
    for index in order:
        try:
            if not as_eager(ctx, index, session.run(None, feeds(session, ctx.spec.input_sets[index]))):
                return f"input set {index + 1} differs"
        except Exception as exc:  # a session that raises does not answer: the level does not avoid the failure
            return f"input set {index + 1} raises {type(exc).__name__}"
    return None


def _nodes(path: Path) -> set[str]:
    import onnx

    if not path.exists():  # some providers write no optimized graph (compiled ones)
        return set()
    return {f"{node.op_type} ({node.domain})" if node.domain else node.op_type
            for node in onnx.load(str(path), load_external_data=False).graph.node}


def optimizer_check(ctx, first: int, providers: list[str]) -> OptimizerSaid:
    """Run the stage's ONNX file at each level below the default, from the highest down, on input set
    `first` and then every other: the first level that answers all of them avoids the difference."""
    path = ctx.artifacts["onnx_export"]
    order = [first, *(i for i in range(len(ctx.spec.input_sets)) if i != first)]
    said = OptimizerSaid()
    with tempfile.TemporaryDirectory() as scratch:
        folder = Path(scratch)
        for below, level in reversed(list(enumerate(LEVELS[:-1]))):
            failed = _answers(ctx, path, providers, level, folder, order)
            said.tried.append(f"{level}: {failed or 'every input set answers as eager does'}")
            if failed is None:
                said.avoids, said.brings = level, LEVELS[below + 1]
                if said.brings == LEVELS[-1]:
                    _session(path, providers, said.brings, folder)  # the default's optimized graph, to compare
                said.fused = sorted(_nodes(folder / f"{said.brings}.onnx") - _nodes(folder / f"{level}.onnx"))
                break
    return said
