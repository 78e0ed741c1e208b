"""onnxruntime helpers the onnxruntime stage and its diagnosis share: the execution providers a deployer
lists for the device, whether this onnxruntime has them, which provider ran each node, and the feed dict
of an input set."""

from __future__ import annotations

import json
from collections import Counter
from pathlib import Path

INSTALL = {"cpu": "pip install 'compatcheck[cpu]'", "cuda": "pip install 'compatcheck[gpu]'"}


def providers(device: str) -> list[str]:
    """The providers onnxruntime's docs list for `device`, best first: TensorRT where its libraries are
    present, then CUDA, then the CPU, which takes the nodes the others do not."""
    if device == "cpu":
        return ["CPUExecutionProvider"]
    try:
        import onnxruntime

        available = onnxruntime.get_available_providers()
    except ImportError:  # the stage skips, naming the install; this is still the list it would ask for
        available = []
    tensorrt = "TensorrtExecutionProvider" in available and _tensorrt_present()
    return [*(["TensorrtExecutionProvider"] if tensorrt else []), "CUDAExecutionProvider", "CPUExecutionProvider"]


def _tensorrt_present() -> bool:
    """The TensorRT libraries the TensorRT provider loads: from pip (tensorrt-libs) or the system."""
    import ctypes.util
    import importlib.util

    return any(importlib.util.find_spec(name) for name in ("tensorrt_libs", "tensorrt")) or \
        ctypes.util.find_library("nvinfer") is not None


def unavailable(device: str) -> str | None:
    """Why the onnxruntime stage cannot run on `device` here, with the install that fixes it, or None."""
    try:
        import onnxruntime
    except ImportError:
        other = "" if device == "cuda" else f", or {INSTALL['cuda']} for the CUDA execution provider"
        return f"onnxruntime is not installed: {INSTALL[device]}{other}"
    if device == "cuda" and "CUDAExecutionProvider" not in onnxruntime.get_available_providers():
        return (f"onnxruntime {onnxruntime.__version__} has no CUDAExecutionProvider (the CPU-only onnxruntime "
                f"package), so the CUDA provider was not tried: pip uninstall onnxruntime, then {INSTALL['cuda']}")
    return None


def profiled(options, folder: Path) -> None:
    """Make a session record which provider runs each node (read back by `nodes_by_provider`)."""
    options.enable_profiling = True
    options.profile_file_prefix = str(folder / "onnxruntime_profile")


def nodes_by_provider(session) -> Counter:
    """How many nodes each provider ran in the runs so far (empty where the profile cannot be read: it is
    a note in the report, never a reason to fail); ends the session's profiling."""
    written = session.end_profiling()
    if not written:
        return Counter()
    path = Path(written)
    try:
        events = json.loads(path.read_text())
    except (OSError, ValueError):
        return Counter()
    finally:
        path.unlink(missing_ok=True)
    # One "<node>_kernel_time" event per node and run (fences around it name no kernel).
    nodes = {(event["name"], event["args"]["provider"]) for event in events if event.get("cat") == "Node"
             and event.get("name", "").endswith("_kernel_time") and "provider" in event.get("args", {})}
    return Counter(provider for _, provider in nodes)


def feeds(session, input_set) -> dict:
    """The session's feed dict for an input set."""
    names = [i.name for i in session.get_inputs()]
    arrays = input_set.arrays_for(names, "the ONNX model", "; the exporter dropped or merged inputs")
    return dict(zip(names, arrays))


def session_options(**settings):
    """SessionOptions as every session compatcheck makes has them: onnxruntime's own log quiet (what goes
    wrong is reported as findings), then `settings` (SessionOptions attributes)."""
    import onnxruntime

    options = onnxruntime.SessionOptions()
    options.log_severity_level = 3
    for name, value in settings.items():
        setattr(options, name, value)
    return options


def upcast_ops(path: str, session_providers: list[str]) -> list[str]:
    """The op types onnxruntime computes in float32 in a graph that asks for float16 or bfloat16: its
    optimizer wraps the nodes it has no kernel of that type for in Cast nodes. Read from the graph it
    optimized, in a session of its own, so the stage's session stays as a deployer makes it."""
    import tempfile
    from pathlib import Path

    import onnx
    import onnxruntime

    with tempfile.TemporaryDirectory() as folder:
        options = session_options(optimized_model_filepath=str(Path(folder) / "optimized.onnx"))
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
