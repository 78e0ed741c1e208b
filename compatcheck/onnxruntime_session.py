"""onnxruntime helpers the onnxruntime stage and its diagnosis share: which execution providers to
use here, and the feed dict of an input set."""

from __future__ import annotations


def providers() -> list[str]:
    import onnxruntime
    import torch

    available = onnxruntime.get_available_providers()
    if "CUDAExecutionProvider" in available and torch.cuda.is_available():
        return ["CUDAExecutionProvider", "CPUExecutionProvider"]
    return ["CPUExecutionProvider"]


def feeds(session, input_set) -> dict:
    """The session's feed dict for an input set."""
    names = [i.name for i in session.get_inputs()]
    arrays = input_set.arrays_for(names, "the ONNX model", "; the exporter dropped or merged inputs")
    return dict(zip(names, arrays))


def upcast_ops(path: str, session_providers: list[str]) -> list[str]:
    """The op types onnxruntime computes in float32 in a graph that asks for float16 or bfloat16: its
    optimizer wraps the nodes it has no kernel of that type for in Cast nodes. Read from the graph it
    optimized, in a session of its own, so the stage's session stays as a deployer makes it."""
    import tempfile
    from pathlib import Path

    import onnx
    import onnxruntime

    with tempfile.TemporaryDirectory() as folder:
        options = onnxruntime.SessionOptions()
        options.log_severity_level = 3
        options.optimized_model_filepath = str(Path(folder) / "optimized.onnx")
        onnxruntime.InferenceSession(path, options, providers=session_providers)
        optimized = onnx.load(options.optimized_model_filepath)
    computed = _float32_ops(optimized)
    return [op for op in computed if op not in _float32_ops(onnx.load(path, load_external_data=False))]


_FLOAT32 = 1  # onnx.TensorProto.FLOAT
_FLOATING = {1, 10, 11, 16}  # float, float16, double, bfloat16
_INTEGER_OUTPUTS = {"Shape", "Size", "NonZero", "ArgMax", "ArgMin"}
# Ops that only move or reshape values (onnxruntime's NCHWc layout ones too): they compute nothing.
_MOVES_ONLY = {"Reshape", "Transpose", "Squeeze", "Unsqueeze", "Flatten", "Identity", "Concat", "Split", "Slice",
               "Gather", "Expand", "ReorderInput", "ReorderOutput"}


def _float32_ops(model) -> list[str]:
    """The op types that compute on float32 values, in graph order: each value's element type is carried
    forward from the graph's inputs and initializers, through Cast's `to`."""
    types = {value.name: value.type.tensor_type.elem_type for value in model.graph.input}
    types.update((init.name, init.data_type) for init in model.graph.initializer)
    found: list[str] = []
    for node in model.graph.node:
        floating = [types[name] for name in node.input if types.get(name) in _FLOATING]
        if node.op_type == "Cast":
            out = next(attribute.i for attribute in node.attribute if attribute.name == "to")
        else:
            out = None if node.op_type in _INTEGER_OUTPUTS else floating[0] if floating else None
            if floating and floating[0] == _FLOAT32 and node.op_type not in _MOVES_ONLY | set(found):
                found.append(node.op_type)
        for name in node.output:
            if out is not None:
                types[name] = out
    return found
