"""The sizes a TorchScript artifact computes along the way, line by line of the user's code, and the same
of eager: where a resize rounds otherwise in the artifact (a trace computes interpolate's size in float32,
eager in float64), the first line whose tensor has another shape is where the two part.

The artifact's graph is copied with every tensor its top-level nodes make added to its outputs and run
on the input set; eager runs under a TorchFunctionMode that records each call's result and the user's
line it came from."""

from __future__ import annotations

import re
import traceback

import torch
from torch.overrides import TorchFunctionMode

Shapes = list[tuple[tuple[str, int], list[int]]]  # ((file, line), shape), in the order the lines ran
LIMIT = 5000  # calls recorded: a size that parts is near the start, and a long loop must not cost much
_TRACED_FRAME = re.compile(r"^(.*)\((\d+)\): \S+$")  # a traced node's stack: "path(line): function"
_SCRIPT_FRAME = re.compile(r'File "(.*)", line (\d+)')  # a scripted node's source range


def _user_line(user, source_range: str) -> tuple[str, int] | None:
    """The innermost line of the user's code in a node's source range."""
    frames = [traceback.FrameSummary(m.group(1), int(m.group(2)), "")
              for m in map(_TRACED_FRAME.match, source_range.splitlines()) if m]
    frames.reverse()  # a traced node lists its stack innermost first
    frames += [traceback.FrameSummary(m.group(1), int(m.group(2)), "") for m in _SCRIPT_FRAME.finditer(source_range)]
    frame = user.innermost(frames)
    return (frame.filename, frame.lineno) if frame else None


def _last_per_line(records: list) -> Shapes:
    """One entry per run of consecutive records at the same line: the shape of its last tensor."""
    shapes: Shapes = []
    for where, shape in records:
        if where is None:
            continue
        if shapes and shapes[-1][0] == where:
            shapes[-1] = (where, shape)
        else:
            shapes.append((where, shape))
    return shapes


def artifact_shapes(module, user, input_set) -> Shapes:
    """The artifact's tensors, line by line, on `input_set`."""
    graph = module.graph.copy()
    made = [(node, out) for node in graph.nodes() if node.kind() != "prim::Uninitialized"
            for out in node.outputs() if out.type().kind() == "TensorType"][:LIMIT]
    everything = graph.insertNode(graph.create("prim::TupleConstruct", [out for _, out in made]))
    everything.output().setType(torch._C.TupleType([out.type() for _, out in made]))
    while list(graph.outputs()):
        graph.eraseOutput(0)
    graph.registerOutput(everything.output())
    run = torch._C._create_function_from_graph("intermediates", graph)
    with torch.no_grad():
        values = run(module._c, *input_set.args, **input_set.kwargs)
    return _last_per_line([(_user_line(user, node.sourceRange()), list(value.shape))
                           for (node, _), value in zip(made, values) if isinstance(value, torch.Tensor)])


class _Recorder(TorchFunctionMode):
    def __init__(self, user):
        super().__init__()
        self.user, self.records = user, []

    def __torch_function__(self, func, types, args=(), kwargs=None):
        result = func(*args, **(kwargs or {}))
        if isinstance(result, torch.Tensor) and len(self.records) < LIMIT:
            frame = self.user.innermost(traceback.extract_stack()[:-1])
            self.records.append(((frame.filename, frame.lineno) if frame else None, list(result.shape)))
        return result


def eager_shapes(model, user, input_set) -> Shapes:
    """Eager's tensors, line by line, on `input_set`: each call the user's code makes, as it returns."""
    recorder = _Recorder(user)
    with torch.no_grad(), recorder:
        model(*input_set.args, **input_set.kwargs)
    return _last_per_line(recorder.records)


def first_size_apart(eager: Shapes, artifact: Shapes) -> tuple[tuple[str, int], list[int], list[int]] | None:
    """The first line, in the order both ran them, whose tensor has another shape in the artifact:
    (line, eager's shape, the artifact's); None where they agree or stop running the same lines."""
    for (where, want), (there, got) in zip(eager, artifact):
        if where != there:
            return None
        if want != got:
            return where, want, got
    return None
