"""Faults on the Triton side, with real servers: no binary, a port another process holds, a server
killed while it answers. Each ends with a clear verdict and nothing left running."""

import json
import os
import signal
import subprocess
import sys
import threading
import time
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from pathlib import Path

import pytest

from compatcheck.triton import launcher as launcher_module
from compatcheck.triton import local
from compatcheck.triton.errors import TritonError
from tests.conftest import ROOT, run_cli, verdicts

pytest.importorskip("tritonclient.grpc", reason="tritonclient is not installed")
pytest.importorskip("tritonclient.http", reason="tritonclient is not installed")

from compatcheck.triton.client import Client  # noqa: E402
from tests.test_triton_server import MANY_INPUT_SETS, wait_until_gone, wait_until_served  # noqa: E402


def descendants(pid: int) -> dict[int, str]:
    """pid -> command line of every live descendant of `pid`, from /proc."""
    children: dict[int, list[int]] = {}
    for entry in filter(str.isdigit, os.listdir("/proc")):
        try:
            parent = int(Path(f"/proc/{entry}/stat").read_text().rsplit(")", 1)[1].split()[1])
        except (OSError, ValueError, IndexError):
            continue
        children.setdefault(parent, []).append(int(entry))
    found, todo = {}, list(children.get(pid, []))
    while todo:
        child = todo.pop()
        try:
            found[child] = Path(f"/proc/{child}/cmdline").read_bytes().replace(b"\0", b" ").decode(errors="replace")
        except OSError:
            continue
        todo += children.get(child, [])
    return found

INSTALLATION = local.find()
needs_server = pytest.mark.skipif(isinstance(INSTALLATION, str),
                                  reason=f"--triton local cannot run here: {INSTALLATION}")


def test_missing_binary_is_a_skip_that_names_it_and_does_not_fail_the_run(tmp_path):
    missing = tmp_path / "no-such-dir" / "tritonserver"
    out = tmp_path / "report.json"
    proc = run_cli("run", "models/convnet.py", "--stages", "onnxruntime,triton", "--json", str(out), "-q",
                   env={local.ENVIRONMENT: str(missing)}, timeout=600)
    report = json.loads(out.read_text())
    assert verdicts(report) == {"eager": "pass", "onnx_export": "pass", "onnxruntime": "pass", "triton": "skip"}
    triton = report["stages"][3]
    assert triton["reason"] == f"tritonserver not found at {missing} (named by COMPATCHECK_TRITONSERVER)"
    assert proc.returncode == 0, proc.stdout + proc.stderr  # a missing optional backend fails nothing


class Squatter(ThreadingHTTPServer):
    """Another server on 127.0.0.1 that says yes to everything, as a Triton would; counts what it gets."""

    def __init__(self):
        self.requests = 0
        squatter = self

        class Handler(BaseHTTPRequestHandler):
            def do_GET(self):
                squatter.requests += 1
                body = b'{"name": "triton", "version": "squatter"}'
                self.send_response(200)
                self.send_header("Content-Length", str(len(body)))
                self.end_headers()
                self.wfile.write(body)

            do_POST = do_GET

            def log_message(self, *args):
                pass

        super().__init__(("127.0.0.1", 0), Handler)
        self.port = self.server_address[1]
        threading.Thread(target=self.serve_forever, daemon=True).start()


@pytest.fixture
def squatter():
    server = Squatter()
    yield server
    server.shutdown()
    server.server_close()


def choosing(monkeypatch, ports):
    """free_port() hands out `ports` (None: a really free one) in turn: another process took a chosen
    port before the server could bind it."""
    real, queue = launcher_module.free_port, list(ports)
    monkeypatch.setattr(launcher_module, "free_port", lambda: (queue.pop(0) if queue else None) or real())


@pytest.mark.slow
@needs_server
@pytest.mark.parametrize("taken", ["http", "grpc"])
def test_port_taken_by_another_server_is_never_ours_and_fresh_ports_are_tried(tmp_path, monkeypatch, squatter,
                                                                               taken):
    choosing(monkeypatch, [squatter.port, None] if taken == "http" else [None, squatter.port])
    (tmp_path / "empty").mkdir()
    server = local.LocalLauncher(tmp_path / "empty", tmp_path / "server", INSTALLATION)
    with server as (http_url, grpc_url):
        assert str(squatter.port) not in (http_url.rpartition(":")[2], grpc_url.rpartition(":")[2])
        client = Client(http_url, grpc_url)
        assert client.server_version() != "squatter"
        assert client.clients["grpc"].get_server_metadata().name == "triton"
        client.close()
    assert squatter.requests == 0, "the launcher talked to the other server"
    assert wait_until_gone(str(tmp_path)) == {}


@pytest.mark.slow
@needs_server
def test_port_taken_on_every_try_fails_naming_the_port(tmp_path, monkeypatch, squatter):
    choosing(monkeypatch, [squatter.port, None] * launcher_module.PORT_TRIES)
    (tmp_path / "empty").mkdir()
    server = local.LocalLauncher(tmp_path / "empty", tmp_path / "server", INSTALLATION)
    started = time.monotonic()
    with pytest.raises(TritonError) as caught:
        with server:
            pass
    assert time.monotonic() - started < 60
    assert str(caught.value) == (f"{server.describe()} could not listen on 127.0.0.1:{squatter.port}: another "
                                 f"process holds it (tried {launcher_module.PORT_TRIES} pairs of free ports)")
    assert squatter.requests == 0
    assert wait_until_gone(str(tmp_path)) == {}


@pytest.mark.slow
@needs_server
def test_server_killed_mid_request_fails_the_stage_promptly_and_leaves_nothing(tmp_path):
    model = tmp_path / "many_input_sets.py"
    model.write_text(MANY_INPUT_SETS)
    artifacts, out, tmp = tmp_path / "artifacts", tmp_path / "report.json", tmp_path / "tmp"
    tmp.mkdir()

    with (tmp_path / "output.txt").open("w") as output:
        process = subprocess.Popen(
            [sys.executable, "-m", "compatcheck", "run", str(model), "--stages", "onnxruntime,triton",
             "--artifacts", str(artifacts), "--json", str(out), "-q"],
            stdout=output, stderr=subprocess.STDOUT, cwd=ROOT,
            env={**os.environ, "COLUMNS": "200", "TMPDIR": str(tmp)},
        )
    try:
        wait_until_served(tmp, process, tmp_path / "output.txt")
        time.sleep(1.0)  # requests are flowing
        # The run works in a private folder of its own: find its server among compatcheck's descendants.
        [(server, cmdline)] = [(pid, cmdline) for pid, cmdline in descendants(process.pid).items()
                               if Path(cmdline.split()[0]).name == "tritonserver"]
        [repository] = [arg.split("=", 1)[1] for arg in cmdline.split() if arg.startswith("--model-repository=")]
        os.kill(server, signal.SIGKILL)
        killed = time.monotonic()
        returncode = process.wait(90)
        # Without the launcher's watch the request in flight waited out its 120 s timeout, held open
        # by the Python stub that inherited the connection.
        assert time.monotonic() - killed < 30
    finally:
        if process.poll() is None:
            process.kill()
            process.wait()
    assert returncode == 1, (tmp_path / "output.txt").read_text()
    report = json.loads(out.read_text())
    assert verdicts(report) == {"eager": "pass", "onnx_export": "pass", "onnxruntime": "pass", "triton": "fail"}
    triton = report["stages"][3]
    assert triton["reason"].startswith("input set "), triton["reason"]
    assert f"TritonError: the server died: {INSTALLATION.source} was killed by SIGKILL" in triton["reason"]
    failed = [one for one in triton["input_sets"] if not one["ok"]]
    assert failed and all("the server died" in one["error"] for one in failed)
    assert any(one["ok"] for one in triton["input_sets"]), "the server was killed before it answered"
    # The stub outlives its server by a minute or more unless the launcher kills it.
    assert wait_until_gone(repository, seconds=5) == {}
