"""The triton stage against a real tritonserver on this machine (`--triton local`): the conv net passes
over HTTP and gRPC and under concurrent requests the dynamic batcher packs, a model that centres over
the batch is caught there, load failures carry the server's reason, and no server process or listener
outlives a run, even one interrupted mid-stage."""

import dataclasses
import json
import os
import signal
import socket
import subprocess
import sys
import time
from pathlib import Path

import numpy as np
import onnx
import pytest
from google.protobuf import text_format
from onnx import TensorProto, helper

from compatcheck.triton import load, local, repository
from compatcheck.triton.errors import TritonLoadError
from tests.faults.conftest import poll_until_empty

pytest.importorskip("tritonclient.grpc", reason="tritonclient is not installed")
pytest.importorskip("tritonclient.http", reason="tritonclient is not installed")

from compatcheck.stages.triton import Triton  # noqa: E402
from compatcheck.triton.client import Client  # noqa: E402

ROOT = Path(__file__).resolve().parents[1]
INSTALLATION = local.find()
pytestmark = [
    pytest.mark.slow,
    pytest.mark.skipif(isinstance(INSTALLATION, str), reason=f"--triton local cannot run here: {INSTALLATION}"),
]
PYTHON_BACKEND = not isinstance(INSTALLATION, str) and not (INSTALLATION.backends / "onnxruntime").is_dir()

RAISES = """
class TritonPythonModel:
    def initialize(self, args):
        raise RuntimeError("weights missing")
"""
# Enough input sets that the stage is still sending requests when the test interrupts it.
MANY_INPUT_SETS = """
import torch

def get_model():
    return torch.nn.Sequential(torch.nn.Linear(4, 8), torch.nn.ReLU(), torch.nn.Linear(8, 2))

def get_inputs():
    return [(torch.randn(1 + i % 3, 4),) for i in range(3000)]
"""


def compatcheck(*args, timeout=600):
    return subprocess.run([sys.executable, "-m", "compatcheck", *args], capture_output=True, text=True,
                          timeout=timeout, cwd=ROOT, env={**os.environ, "COLUMNS": "200"})


def processes_mentioning(text: str) -> dict[int, str]:
    """pid -> command line of every live process whose command line contains `text`, from /proc."""
    found = {}
    for entry in os.listdir("/proc"):
        if not entry.isdigit() or int(entry) == os.getpid():
            continue
        try:
            cmdline = Path(f"/proc/{entry}/cmdline").read_bytes().replace(b"\0", b" ").decode(errors="replace")
        except OSError:
            continue
        if text in cmdline:
            found[int(entry)] = cmdline
    return found


def wait_until_served(tmp: Path, process: subprocess.Popen, output: Path, seconds: float = 300) -> None:
    """Waits until the server of the run `process` (working in a private folder under `tmp`, its TMPDIR)
    has loaded the model; fails with the run's output if the run ends first."""
    def loaded() -> bool:
        return any("successfully loaded" in log.read_text(errors="replace")
                   for log in tmp.glob("compatcheck-run-*/triton/server.log"))

    deadline = time.monotonic() + seconds
    while not loaded():
        assert process.poll() is None, output.read_text()
        assert time.monotonic() < deadline, "the server did not load the model in time"
        time.sleep(0.1)


def wait_until_gone(text: str, seconds: float = 15) -> dict[int, str]:
    return poll_until_empty(lambda: processes_mentioning(text), seconds)


def listening(address: str) -> bool:
    """Whether something still accepts connections at HOST:PORT."""
    host, _, port = address.rpartition(":")
    try:
        socket.create_connection((host, int(port)), timeout=1).close()
    except OSError:
        return False
    return True


def identity_onnx(path: Path) -> Path:
    graph = helper.make_graph(
        [helper.make_node("Identity", ["x"], ["y"])], "identity",
        [helper.make_tensor_value_info("x", TensorProto.FLOAT, ["batch", 4])],
        [helper.make_tensor_value_info("y", TensorProto.FLOAT, ["batch", 4])],
    )
    onnx.save(helper.make_model(graph), str(path))
    return path


def test_convnet_passes_over_http_and_grpc(tmp_path):
    artifacts = tmp_path / "artifacts"
    out = tmp_path / "report.json"
    # A queue delay of 500 ms (default 100): on a loaded machine the 16 requests still reach the batcher
    # within one window.
    run = compatcheck("run", "models/convnet.py", "--stages", "triton", "--artifacts", str(artifacts),
                      "--json", str(out), "-q", "--triton-queue-delay", "500", timeout=600)
    assert run.returncode == 0, run.stdout + run.stderr
    stage = {s["name"]: s for s in json.loads(out.read_text())["stages"]}["triton"]
    assert stage["status"] == "pass", stage
    served = "python backend (onnxruntime)" if PYTHON_BACKEND else "onnxruntime backend"
    assert f"{served} via local" in stage["backend"]
    assert "ready in" in stage["backend"] and "HTTP first request" in stage["backend"]
    assert "gRPC first request" in stage["backend"]
    # the swept sizes are sent over both protocols too
    assert f"HTTP and gRPC answers identical on {2 + len(stage['swept'])} input sets" in stage["backend"]
    shapes = [[leaf["shape"] for leaf in one["leaves"]] for one in stage["input_sets"]]
    assert shapes == [[[2, 10]], [[5, 10]]]
    assert all(one["ok"] for one in stage["input_sets"])
    assert (artifacts / "triton" / "repository" / "convnet" / "config.pbtxt").exists()
    served = stage["load"]
    assert len(served["requests"]) == 16 and all(request["ok"] for request in served["requests"])
    assert {request["protocol"] for request in served["requests"]} == {"http", "grpc"}
    assert len({request["rows"][1] - request["rows"][0] for request in served["requests"]}) > 1
    assert served["executions"] < 16, served  # the batcher really packed them
    assert served["inferences"] == sum(request["rows"][1] - request["rows"][0] for request in served["requests"])
    assert sum(served["batch_stats"].values()) == served["executions"]
    assert f"16 concurrent requests (8 HTTP, 8 gRPC) ran in {served['executions']} execution" in stage["backend"]
    if PYTHON_BACKEND:
        assert served["shared"] > 1
    assert not any(finding["kind"] == "batch-dependence" for one in json.loads(out.read_text())["stages"]
                   for finding in one["findings"])
    assert wait_until_gone(str(artifacts)) == {}
    assert not any(map(listening, served["addresses"]))


def test_a_model_centred_over_the_batch_changes_answers_when_batched(tmp_path):
    out = tmp_path / "report.json"
    run = compatcheck("run", "tests/models/batch_statistics.py", "--stages", "triton", "--artifacts",
                      str(tmp_path / "artifacts"), "--json", str(out), "-q", timeout=600)
    assert run.returncode == 1, run.stdout + run.stderr
    stages = {s["name"]: s for s in json.loads(out.read_text())["stages"]}
    [eager] = stages["eager"]["findings"]
    assert eager["kind"] == "batch-dependence" and eager["code"] == "return h - h.mean(dim=0, keepdim=True)"
    triton = stages["triton"]
    assert triton["status"] == "mismatch", triton
    [finding] = [one for one in triton["findings"] if one["kind"] == "batch-dependence"]
    first = triton["load"]["requests"][0]
    assert not first["ok"] and first["id"] == "r1" and first["rows"] == [0, 1]
    assert finding["message"] == triton["reason"]
    assert "request r1 (HTTP, input set 1 sample 1) answered differently" in finding["message"]
    assert "alone it matched eager" in finding["message"]
    if PYTHON_BACKEND:  # the Python-backend model logs which requests ran together
        assert first["shared_with"], triton["load"]
        assert f"when it shared a batch with {', '.join(first['shared_with'])}:" in finding["message"]
    assert wait_until_gone(str(tmp_path / "artifacts")) == {}
    assert not any(map(listening, triton["load"]["addresses"]))


@pytest.fixture(scope="module")
def broken_repository(tmp_path_factory):
    """A server on a repository of models that cannot load, each for another reason, and one that can."""
    root = tmp_path_factory.mktemp("broken")
    onnx_file = identity_onnx(root / "model.onnx")
    io = repository.onnx_io(onnx_file)
    repo = root / "repository"
    for name in ("raises", "unparsable", "invalid"):
        repository.write_model(repo, name, "onnx", onnx_file, io, native=False)
    repository.write_model(repo, "identity", "onnx", onnx_file, io, native=not PYTHON_BACKEND, batch_size=8,
                           queue_delay_ms=200)
    (repo / "raises" / "1" / "model.py").write_text(RAISES)
    unparsable = repo / "unparsable" / "config.pbtxt"
    unparsable.write_text(unparsable.read_text() + "bogus_field: 1\n")
    invalid = repository.model_config("invalid", "python", io, 8)
    invalid.dynamic_batching.preferred_batch_size.append(1000)  # more than max_batch_size 8
    (repo / "invalid" / "config.pbtxt").write_text(text_format.MessageToString(invalid))
    launcher = local.LocalLauncher(repo, root / "server", INSTALLATION)
    with launcher as (http_url, grpc_url):
        client = Client(http_url, grpc_url)
        yield launcher, client, (http_url, grpc_url)
        client.close()


def test_exception_in_initialize_is_the_finding(broken_repository):
    launcher, client, _ = broken_repository
    with pytest.raises(TritonLoadError) as caught:
        client.load("raises", launcher)
    assert "RuntimeError: weights missing" in caught.value.reason.splitlines()[0]
    [finding] = Triton().diagnose(None, caught.value)
    assert finding.kind == "triton-load-failure" and finding.stage == "triton"
    assert "RuntimeError: weights missing" in finding.message and "initialize" in finding.message


def test_config_that_does_not_parse_shows_the_server_log_reason(broken_repository):
    launcher, client, _ = broken_repository
    with pytest.raises(TritonLoadError) as caught:
        client.load("unparsable", launcher)
    first = caught.value.reason.splitlines()[0]
    assert "failed to poll from model repository" in first
    assert 'no field named "bogus_field"' in first


def test_config_the_server_rejects_shows_the_server_log_reason(broken_repository):
    launcher, client, _ = broken_repository
    with pytest.raises(TritonLoadError) as caught:
        client.load("invalid", launcher)
    assert "dynamic batching preferred size must be <= max batch size" in str(caught.value)


@pytest.fixture(scope="module")
def identity(broken_repository):
    """The identity model on that server, batched up to 8 samples, the batcher waiting 200 ms."""
    launcher, client, urls = broken_repository
    client.load("identity", launcher)
    [x] = repository.onnx_io(launcher.repository / "identity" / "1" / "model.onnx").inputs
    return client, urls, x


def test_concurrent_requests_share_executions_and_keep_their_answers(identity):
    client, urls, x = identity
    requests = [load.Request(f"r{n}", ("http", "grpc")[n % 2], ((x, np.full((1 + n % 3, 4), n, np.float32)),))
                for n in range(12)]
    before = client.statistics("identity")
    answers = load.together(urls, "identity", requests, ["y"])
    stats = client.statistics("identity").since(before)
    assert all((answers[r.id][0] == r.inputs[0][1]).all() for r in requests)
    assert stats.inferences == sum(len(r.inputs[0][1]) for r in requests)
    assert stats.executions < len(requests) and sum(stats.batches.values()) == stats.executions
    assert max(stats.batches) <= 8


def test_a_bench_level_stops_at_its_request_count(identity):
    client, urls, x = identity
    started = time.monotonic()
    level = load.level(urls, "identity", [(x, np.ones((2, 4), np.float32))], ["y"], "grpc", 4,
                       requests=20, seconds=5)
    assert len(level.latencies) == 20 and level.concurrency == 4 and level.protocol == "grpc"
    assert 0 < level.percentile_ms(50) <= level.percentile_ms(99) < 5e3
    assert time.monotonic() - started < 30


def test_a_bench_level_stops_at_its_deadline(identity):
    client, urls, x = identity
    started = time.monotonic()
    level = load.level(urls, "identity", [(x, np.ones((2, 4), np.float32))], ["y"], "http", 1,
                       requests=10**6, seconds=1)
    assert 0 < len(level.latencies) < 10**6 and level.seconds < 5
    assert time.monotonic() - started < 30


@pytest.mark.skipif(not PYTHON_BACKEND, reason="needs nvidia-pytriton's server, whose Python stub is set up by hand")
def test_python_stub_that_cannot_start_fails_fast(tmp_path):
    onnx_file = identity_onnx(tmp_path / "model.onnx")
    repository.write_model(tmp_path / "repo", "m", "onnx", onnx_file, repository.onnx_io(onnx_file), native=False)
    without_libraries = dataclasses.replace(INSTALLATION, libraries=INSTALLATION.libraries[:1])
    launcher = local.LocalLauncher(tmp_path / "repo", tmp_path / "server", without_libraries)
    with launcher as (http_url, grpc_url):
        client = Client(http_url, grpc_url)
        started = time.monotonic()
        with pytest.raises(TritonLoadError, match="error while loading shared libraries"):
            client.load("m", launcher)
        assert time.monotonic() - started < 30
        client.close()
    assert wait_until_gone(str(tmp_path)) == {}


def test_url_launcher_loads_through_the_api_and_reports_the_reason(tmp_path):
    (tmp_path / "empty").mkdir()
    launcher = local.LocalLauncher(tmp_path / "empty", tmp_path / "server", INSTALLATION)
    out = tmp_path / "report.json"
    with launcher as (http_url, grpc_url):
        run = compatcheck("run", "models/convnet.py", "--stages", "triton", "--triton", "url",
                          "--triton-url", f"{http_url},{grpc_url}", "--json", str(out), "-q", timeout=600)
        client = Client(http_url, grpc_url)
        index = client.clients["http"].get_model_repository_index()
        client.close()
    stage = {s["name"]: s for s in json.loads(out.read_text())["stages"]}["triton"]
    assert "via url" in stage["backend"]
    assert index == [], "the model was left on the server"
    if PYTHON_BACKEND:  # the url launcher sends native onnxruntime models; this server has no such backend
        assert stage["status"] == "fail" and run.returncode == 1
        [finding] = stage["findings"]
        assert finding["kind"] == "triton-load-failure"
        assert "unable to find backend library for backend 'onnxruntime'" in finding["message"]
    else:
        assert stage["status"] == "pass", stage


def test_interrupted_run_leaves_no_server_behind(tmp_path):
    model = tmp_path / "many_input_sets.py"
    model.write_text(MANY_INPUT_SETS)
    artifacts, tmp = tmp_path / "artifacts", tmp_path / "tmp"
    tmp.mkdir()

    with (tmp_path / "output.txt").open("w") as output:
        process = subprocess.Popen(
            [sys.executable, "-m", "compatcheck", "run", str(model), "--stages", "triton", "--artifacts",
             str(artifacts), "-q"], stdout=output, stderr=subprocess.STDOUT, cwd=ROOT,
            env={**os.environ, "TMPDIR": str(tmp)},
        )
    try:
        wait_until_served(tmp, process, tmp_path / "output.txt")
        serving = {Path(cmdline.split()[0]).name for cmdline in processes_mentioning(str(tmp)).values()}
        assert {"tritonserver"} | ({"triton_python_backend_stub"} if PYTHON_BACKEND else set()) <= serving
        process.send_signal(signal.SIGINT)
        assert process.wait(60) == 130, (tmp_path / "output.txt").read_text()
    finally:
        if process.poll() is None:
            process.kill()
            process.wait()
    assert wait_until_gone(str(tmp)) == {}
