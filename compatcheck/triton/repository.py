"""A Triton model repository from the stage artifacts.

config.pbtxt is built with Triton's own ModelConfig proto (shipped with tritonclient) and checked by
parsing it back. Tensor names, dtypes and dims come from the ONNX file; the TorchScript model reuses
them under the names the pytorch backend expects (input__0, output__0, ...). A `native` model runs in
the onnxruntime or pytorch backend of a full server; a `python` model runs the same file with
onnxruntime or torch inside the Python backend (python_model.py), for servers built with only that.
"""

from __future__ import annotations

import re
import shutil
from dataclasses import dataclass, replace
from pathlib import Path
from typing import Iterable

from compatcheck.triton.errors import TritonError

DEFAULT_MAX_BATCH_SIZE = 64
VERSION = "1"
# The config parameter naming the file python_model.py appends each execution's request ids to: set
# only in the config the triton stage loads the model with, never in a repository on disk.
EXECUTION_LOG = "execution_log"
WRAPPER = Path(__file__).with_name("python_model.py")

# ONNX element type name -> Triton datatype (the client's name; the config enum is TYPE_<name>).
DATATYPES = {
    "FLOAT": "FP32", "FLOAT16": "FP16", "DOUBLE": "FP64", "BFLOAT16": "BF16",
    "INT8": "INT8", "INT16": "INT16", "INT32": "INT32", "INT64": "INT64",
    "UINT8": "UINT8", "UINT16": "UINT16", "UINT32": "UINT32", "UINT64": "UINT64",
    "BOOL": "BOOL", "STRING": "BYTES",
}
# artifact kind -> (native backend, file name that backend loads)
KINDS = {"onnx": ("onnxruntime", "model.onnx"), "torchscript": ("pytorch", "model.pt")}


@dataclass(frozen=True)
class TensorSpec:
    name: str
    datatype: str  # Triton's name: FP32, INT64, ...
    shape: tuple[int, ...]  # the full shape, -1 where dynamic
    leading: str | None = None  # the name of its first dim, where that is symbolic: the batch dim it may share


@dataclass(frozen=True)
class ModelIO:
    inputs: tuple[TensorSpec, ...]
    outputs: tuple[TensorSpec, ...]
    batched: bool  # every tensor starts with the same dynamic dimension: Triton may batch on it

    def renamed(self, input_name: str, output_name: str) -> "ModelIO":
        """The same tensors named `input_name.format(index)`, e.g. the pytorch backend's input__0."""
        return replace(
            self,
            inputs=tuple(replace(t, name=input_name.format(i)) for i, t in enumerate(self.inputs)),
            outputs=tuple(replace(t, name=output_name.format(i)) for i, t in enumerate(self.outputs)),
        )


def onnx_io(path: Path) -> ModelIO:
    import onnx

    graph = onnx.load(str(path), load_external_data=False).graph
    weights = {init.name for init in graph.initializer}
    symbols = []

    def spec(value) -> TensorSpec:
        tensor = value.type.tensor_type
        if not value.type.HasField("tensor_type") or not tensor.HasField("shape"):
            raise TritonError(f"ONNX tensor {value.name!r} has no tensor shape; Triton needs its dims")
        kind = onnx.TensorProto.DataType.Name(tensor.elem_type)
        if kind not in DATATYPES:
            raise TritonError(f"ONNX tensor {value.name!r} has type {kind}, which Triton does not serve")
        dims = tensor.shape.dim
        symbols.append(dims[0].dim_param if dims and dims[0].HasField("dim_param") else None)
        return TensorSpec(value.name, DATATYPES[kind],
                          tuple(d.dim_value if d.HasField("dim_value") else -1 for d in dims), symbols[-1])

    inputs = tuple(spec(v) for v in graph.input if v.name not in weights)
    outputs = tuple(spec(v) for v in graph.output)
    return ModelIO(inputs, outputs, batched=symbols[0] is not None and len(set(symbols)) == 1)


def max_batch_size(batch_sizes: Iterable[int]) -> int:
    """Room for every batch the input sets send, and at least the default."""
    return max([DEFAULT_MAX_BATCH_SIZE, *batch_sizes])


def model_name(stem: str) -> str:
    return re.sub(r"[^A-Za-z0-9_.-]", "_", stem) or "model"


def model_config(name: str, backend: str, io: ModelIO, batch_size: int, device: str = "cpu",
                 queue_delay_ms: float = 0.0):
    """The ModelConfig message; max_batch_size and dynamic_batching (waiting up to `queue_delay_ms` to
    gather a batch) only with a dynamic batch dimension. One instance on the device asked for: left out,
    Triton picks the GPU wherever it sees one."""
    from tritonclient.grpc import model_config_pb2 as mc

    config = mc.ModelConfig(name=name, backend=backend, max_batch_size=batch_size if io.batched else 0)
    kind = "KIND_GPU" if device == "cuda" else "KIND_CPU"
    config.instance_group.add(kind=mc.ModelInstanceGroup.Kind.Value(kind), count=1)
    for specs, field in ((io.inputs, config.input), (io.outputs, config.output)):
        for spec in specs:
            dims = spec.shape[1:] if io.batched else spec.shape
            tensor = field.add(name=spec.name, data_type=mc.DataType.Value(f"TYPE_{spec.datatype}"),
                               dims=dims or [1])
            if not dims:
                tensor.reshape.SetInParent()  # Triton wants at least one dim: a scalar is [1] reshaped to []
    if io.batched:
        config.dynamic_batching.SetInParent()
        config.dynamic_batching.max_queue_delay_microseconds = round(queue_delay_ms * 1000)
    return config


def config_text(config) -> str:
    """config.pbtxt text, checked by parsing it back into the same message."""
    from google.protobuf import text_format
    from tritonclient.grpc import model_config_pb2 as mc

    text = text_format.MessageToString(config)
    if text_format.Parse(text, mc.ModelConfig()) != config:
        raise TritonError(f"config.pbtxt for {config.name!r} does not parse back to the same config")
    return text


def write_model(repository: Path, name: str, kind: str, artifact: Path, io: ModelIO, *, native: bool,
                batch_size: int = DEFAULT_MAX_BATCH_SIZE, device: str = "cpu", queue_delay_ms: float = 0.0):
    """Write <repository>/<name>/config.pbtxt and 1/<artifact>; return the ModelConfig written."""
    backend, filename = KINDS[kind]
    if kind == "torchscript":
        io = io.renamed("input__{}", "output__{}")
    config = model_config(name, backend if native else "python", io, batch_size, device, queue_delay_ms)
    folder = repository / name / VERSION
    folder.mkdir(parents=True, exist_ok=True)
    shutil.copyfile(artifact, folder / filename)
    external = Path(f"{artifact}.data")  # ONNX weights saved beside the graph for models over 2 GB
    if kind == "onnx" and external.exists():
        shutil.copyfile(external, folder / f"{filename}.data")
    if not native:
        shutil.copyfile(WRAPPER, folder / "model.py")
    (repository / name / "config.pbtxt").write_text(config_text(config))
    return config


def model_files(repository: Path, name: str) -> dict[str, bytes]:
    """The version folder's files as the load API takes them, for a server that cannot see our disk."""
    folder = repository / name / VERSION
    return {f"file:{VERSION}/{path.name}": path.read_bytes() for path in sorted(folder.iterdir())}
