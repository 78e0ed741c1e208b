"""The Triton model repository: config.pbtxt from Triton's ModelConfig proto, parsed back, for the
conv net's real ONNX export (dynamic batch) and for static and scalar-output graphs."""

import os
import subprocess
import sys
from pathlib import Path

import onnx
import pytest
from google.protobuf import text_format
from onnx import TensorProto, helper

from compatcheck.triton import repository
from compatcheck.triton.errors import TritonError

mc = pytest.importorskip("tritonclient.grpc.model_config_pb2", reason="tritonclient is not installed")
ROOT = Path(__file__).resolve().parents[1]


def compatcheck(*args, timeout=600):
    return subprocess.run([sys.executable, "-m", "compatcheck", *args], capture_output=True, text=True,
                          timeout=timeout, cwd=ROOT, env={**os.environ, "COLUMNS": "200"})


@pytest.fixture(scope="module")
def convnet_onnx(tmp_path_factory) -> Path:
    """models/convnet.py exported by compatcheck's own onnx_export stage (two batch sizes: dynamic batch)."""
    artifacts = tmp_path_factory.mktemp("convnet")
    run = compatcheck("run", "models/convnet.py", "--stages", "onnx_export", "--artifacts", str(artifacts), "-q",
                      timeout=300)
    assert run.returncode == 0, run.stdout + run.stderr
    return artifacts / "model.onnx"


def graph_file(tmp_path: Path, inputs, outputs, name="model.onnx") -> Path:
    """A one-node ONNX graph (Identity) with the given input and output value infos."""
    node = helper.make_node("Identity", [inputs[0].name], [outputs[0].name])
    model = helper.make_model(helper.make_graph([node], "g", inputs, outputs))
    path = tmp_path / name
    onnx.save(model, str(path))
    return path


def parsed(folder: Path) -> "mc.ModelConfig":
    return text_format.Parse((folder / "config.pbtxt").read_text(), mc.ModelConfig())


def test_convnet_config_has_dynamic_batching_and_parses_back(convnet_onnx, tmp_path):
    io = repository.onnx_io(convnet_onnx)
    assert io.batched
    config = repository.write_model(tmp_path, "convnet", "onnx", convnet_onnx, io, native=True, batch_size=64)
    again = parsed(tmp_path / "convnet")
    assert again == config
    assert again.backend == "onnxruntime" and again.max_batch_size == 64 and again.HasField("dynamic_batching")
    [x] = again.input
    [y] = again.output
    graph = onnx.load(str(convnet_onnx)).graph
    assert x.name == graph.input[0].name and y.name == graph.output[0].name
    assert x.data_type == mc.TYPE_FP32 and list(x.dims) == [3, 32, 32]
    assert y.data_type == mc.TYPE_FP32 and list(y.dims) == [10]
    assert (tmp_path / "convnet" / "1" / "model.onnx").read_bytes() == convnet_onnx.read_bytes()


def test_python_backend_wrapper_keeps_the_native_tensors(convnet_onnx, tmp_path):
    io = repository.onnx_io(convnet_onnx)
    native = repository.write_model(tmp_path / "a", "m", "onnx", convnet_onnx, io, native=True)
    python = repository.write_model(tmp_path / "b", "m", "onnx", convnet_onnx, io, native=False)
    assert python.backend == "python"
    assert list(python.input) == list(native.input) and list(python.output) == list(native.output)
    assert sorted(p.name for p in (tmp_path / "b" / "m" / "1").iterdir()) == ["model.onnx", "model.py"]
    assert sorted(repository.model_files(tmp_path / "b", "m")) == ["file:1/model.onnx", "file:1/model.py"]


def test_torchscript_model_uses_pytorch_backend_names(convnet_onnx, tmp_path):
    script = tmp_path / "model.script.pt"
    script.write_bytes(b"not read by the config")
    io = repository.onnx_io(convnet_onnx)
    config = repository.write_model(tmp_path / "repo", "m", "torchscript", script, io, native=True)
    assert parsed(tmp_path / "repo" / "m") == config
    assert config.backend == "pytorch"
    assert [t.name for t in config.input] == ["input__0"] and [t.name for t in config.output] == ["output__0"]
    assert (tmp_path / "repo" / "m" / "1" / "model.pt").exists()


def test_static_graph_has_no_batching(tmp_path):
    path = graph_file(tmp_path, [helper.make_tensor_value_info("x", TensorProto.INT64, [2, 7])],
                      [helper.make_tensor_value_info("y", TensorProto.INT64, [2, 7])])
    io = repository.onnx_io(path)
    assert not io.batched
    config = repository.write_model(tmp_path / "repo", "static", "onnx", path, io, native=True)
    again = parsed(tmp_path / "repo" / "static")
    assert again == config and again.max_batch_size == 0 and not again.HasField("dynamic_batching")
    assert list(again.input[0].dims) == [2, 7] and again.input[0].data_type == mc.TYPE_INT64


def test_dynamic_dims_that_are_not_one_batch_stay_unbatched(tmp_path):
    path = graph_file(tmp_path, [helper.make_tensor_value_info("x", TensorProto.FLOAT, ["n", "m"])],
                      [helper.make_tensor_value_info("y", TensorProto.FLOAT, ["k", "m"])])
    io = repository.onnx_io(path)
    assert not io.batched
    config = repository.model_config("m", "onnxruntime", io, 64)
    assert config.max_batch_size == 0 and list(config.input[0].dims) == [-1, -1]


def test_batched_scalar_per_sample_is_reshaped(tmp_path):
    path = graph_file(tmp_path, [helper.make_tensor_value_info("x", TensorProto.BOOL, ["batch"])],
                      [helper.make_tensor_value_info("y", TensorProto.BOOL, ["batch"])])
    config = repository.model_config("m", "onnxruntime", repository.onnx_io(path), 8)
    assert config.max_batch_size == 8
    assert list(config.input[0].dims) == [1] and config.input[0].HasField("reshape")
    assert list(config.input[0].reshape.shape) == []
    assert repository.config_text(config)  # still parses back


def test_unservable_dtype_is_a_clear_error(tmp_path):
    path = graph_file(tmp_path, [helper.make_tensor_value_info("x", TensorProto.COMPLEX64, [2])],
                      [helper.make_tensor_value_info("y", TensorProto.COMPLEX64, [2])])
    with pytest.raises(TritonError, match="COMPLEX64"):
        repository.onnx_io(path)


def test_model_names_are_directory_safe():
    assert repository.model_name("conv net.v2") == "conv_net.v2"
    assert repository.max_batch_size([2, 5]) == repository.DEFAULT_MAX_BATCH_SIZE
    assert repository.max_batch_size([2, 500]) == 500


@pytest.mark.slow
def test_triton_repo_command_writes_native_and_python_repositories(tmp_path):
    for backend in ("native", "python"):
        out = tmp_path / backend
        run = compatcheck("triton-repo", "models/convnet.py", "-o", str(out), "--triton-backend", backend,
                          timeout=300)
        assert run.returncode == 0, run.stdout + run.stderr
        onnx_config = parsed(out / "convnet_onnx")
        script_config = parsed(out / "convnet_torchscript")
        expected = ("onnxruntime", "pytorch") if backend == "native" else ("python", "python")
        assert (onnx_config.backend, script_config.backend) == expected
        assert onnx_config.max_batch_size == script_config.max_batch_size == 64
        assert (out / "convnet_torchscript" / "1" / "model.pt").exists()
        assert (out / "convnet_onnx" / "1" / "model.py").exists() == (backend == "python")
    again = compatcheck("triton-repo", "models/convnet.py", "-o", str(tmp_path / "native"))
    assert again.returncode == 2 and "not empty" in again.stderr


def test_queue_delay_is_written_in_microseconds(tmp_path):
    path = graph_file(tmp_path, [helper.make_tensor_value_info("x", TensorProto.FLOAT, ["batch", 4])],
                      [helper.make_tensor_value_info("y", TensorProto.FLOAT, ["batch", 4])])
    config = repository.write_model(tmp_path / "repo", "m", "onnx", path, repository.onnx_io(path), native=True,
                                    queue_delay_ms=100)
    again = parsed(tmp_path / "repo" / "m")
    assert again == config and again.dynamic_batching.max_queue_delay_microseconds == 100_000
    assert "execution_log" not in (tmp_path / "repo" / "m" / "config.pbtxt").read_text()


def test_an_output_that_drops_the_batch_is_a_misfit_of_the_config(tmp_path):
    from compatcheck.triton.load import misfits

    path = graph_file(tmp_path, [helper.make_tensor_value_info("x", TensorProto.FLOAT, ["batch", 4])],
                      [helper.make_tensor_value_info("y", TensorProto.FLOAT, [4])])
    io = repository.onnx_io(path)
    config = repository.model_config("m", "onnxruntime", io, 64)
    [said] = misfits(io, config.max_batch_size, 5)
    assert said.startswith("config.pbtxt has max_batch_size 0, so the dynamic batcher is off")
    assert "output 'y' [4]" in said and "does not keep the inputs' batch dimension 'batch'" in said


def test_inputs_without_one_batch_dimension_are_a_misfit_of_the_config(tmp_path):
    from compatcheck.triton.load import misfits

    path = graph_file(tmp_path, [helper.make_tensor_value_info("x", TensorProto.FLOAT, ["n", 4]),
                                 helper.make_tensor_value_info("z", TensorProto.FLOAT, [3, 4])],
                      [helper.make_tensor_value_info("y", TensorProto.FLOAT, ["n", 4])])
    [said] = misfits(repository.onnx_io(path), 0, 5)
    assert "input 'z' [3, 4]" in said and "share no dynamic first dimension" in said


def test_a_max_batch_size_below_the_largest_request_is_a_misfit(tmp_path):
    from compatcheck.triton.load import misfits

    path = graph_file(tmp_path, [helper.make_tensor_value_info("x", TensorProto.FLOAT, ["batch", 4])],
                      [helper.make_tensor_value_info("y", TensorProto.FLOAT, ["batch", 4])])
    io = repository.onnx_io(path)
    assert misfits(io, 64, 64) == []
    [said] = misfits(io, 8, 9)
    assert "max_batch_size 8, below the largest request (9 samples)" in said


def test_load_goes_only_to_this_machine():
    from compatcheck.triton import load

    assert all(map(load.loopback, ["127.0.0.1:8000", "localhost:8001", "[::1]:8000", "127.0.0.2:1"]))
    assert not any(map(load.loopback, ["10.0.0.1:8000", "example.com:80", "[2001:db8::1]:8000", "8000"]))
    with pytest.raises(TritonError, match="refusing to send load to 10.0.0.1:8001"):
        load.together(("127.0.0.1:8000", "10.0.0.1:8001"), "m", [], [])
    with pytest.raises(TritonError, match="not this machine"):
        load.level(("example.com:8000", "127.0.0.1:8001"), "m", [], [], "http", 4)


def test_payloads_are_distinct_slices_of_mixed_sizes():
    from compatcheck.triton.load import slices

    made = slices([3, 5], 16)
    assert len(made) == len(set(made)) == 16
    assert {end - start for _, start, end in made} >= {1, 2, 3}
    assert {index for index, _, _ in made} == {0, 1}
    assert all(0 <= start < end <= (3, 5)[index] for index, start, end in made)
    assert slices([None], 3) == [(0, None, None)] * 3
