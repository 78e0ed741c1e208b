"""Launchers without a server: the docker launcher's exact command lines, the url launcher's addresses,
and reading the server log. A real container runs only where a docker engine is reachable."""

import json
import os
import subprocess
import sys
from pathlib import Path

import pytest

from compatcheck.options import RunOptions
from compatcheck.triton.docker import DockerLauncher, docker_cli
from compatcheck.triton.launcher import EXIT_TIMEOUT, ServerLog, free_port
from compatcheck.triton.url import UrlLauncher, addresses

ROOT = Path(__file__).resolve().parents[1]
IMAGE = RunOptions.model_fields["triton_image"].default


def test_docker_run_command(tmp_path):
    launcher = DockerLauncher(tmp_path / "repo", tmp_path / "work", "nvcr.io/nvidia/tritonserver:24.10-py3")
    assert launcher.name.startswith("compatcheck-triton-")
    assert launcher.command(18000, 18001) == [
        "docker", "run", "--rm", "--name", launcher.name, "--label", "compatcheck=triton",
        "--publish", "127.0.0.1:18000:8000", "--publish", "127.0.0.1:18001:8001",
        "--volume", f"{(tmp_path / 'repo').resolve()}:/models:ro",
        "nvcr.io/nvidia/tritonserver:24.10-py3", "tritonserver", "--model-repository=/models",
        "--http-port=8000", "--grpc-port=8001",
        "--model-control-mode=explicit", "--disable-auto-complete-config", "--strict-readiness=true",
        f"--exit-timeout-secs={EXIT_TIMEOUT}", "--allow-metrics=false", "--allow-sagemaker=false",
        "--allow-vertex-ai=false",
    ]


def test_docker_gpus_and_stop_commands(tmp_path):
    launcher = DockerLauncher(tmp_path, tmp_path, "img:1", gpus=True, docker="/usr/bin/docker")
    command = launcher.command(1, 2)
    assert command[command.index("--gpus") + 1] == "all" and command[0] == "/usr/bin/docker"
    assert launcher.stop_command() == ["/usr/bin/docker", "stop", "--time", str(EXIT_TIMEOUT), launcher.name]


def test_reaper_removes_the_container_once_its_pipe_closes(tmp_path):
    calls = tmp_path / "calls"
    cli = tmp_path / "docker"  # stands in for the docker CLI: records what it was asked
    cli.write_text(f'#!/bin/sh\necho "$@" >> {calls}\n')
    cli.chmod(0o755)
    launcher = DockerLauncher(tmp_path, tmp_path, "img:1", docker=str(cli))
    reaper = subprocess.Popen(launcher.reaper_command(), stdin=subprocess.PIPE)
    with pytest.raises(subprocess.TimeoutExpired):
        reaper.wait(0.5)
    assert not calls.exists()
    reaper.stdin.close()
    assert reaper.wait(10) == 0
    assert calls.read_text() == f"rm --force {launcher.name}\n"


def test_docker_unavailable_says_why():
    reason = DockerLauncher.unavailable(IMAGE)
    if docker_cli() is None:
        assert reason == "no docker CLI on PATH"
    elif reason is not None:
        assert reason.startswith(("no docker engine", "image ")), reason


@pytest.mark.slow
def test_triton_stage_in_the_official_image(tmp_path):
    reason = DockerLauncher.unavailable(IMAGE)
    if reason:
        pytest.skip(f"--triton docker cannot run here: {reason}")
    out = tmp_path / "report.json"
    run = subprocess.run(
        [sys.executable, "-m", "compatcheck", "run", "models/convnet.py", "--stages", "triton", "--triton", "docker",
         "--json", str(out), "-q"], capture_output=True, text=True, timeout=900, cwd=ROOT,
    )
    stage = {s["name"]: s for s in json.loads(out.read_text())["stages"]}["triton"]
    assert stage["status"] == "pass", run.stdout + run.stderr
    assert "onnxruntime backend via docker" in stage["backend"]
    listed = subprocess.run(["docker", "ps", "--all", "--filter", "label=compatcheck=triton", "--quiet"],
                            capture_output=True, text=True, timeout=30)
    assert listed.stdout.strip() == "", "a container was left behind"


def test_url_addresses():
    assert addresses("localhost:8000") == ("localhost:8000", "localhost:8001")
    assert addresses("http://10.0.0.2:9000/") == ("10.0.0.2:9000", "10.0.0.2:9001")
    assert addresses("a:1,b:2") == ("a:1", "b:2")
    with pytest.raises(ValueError):
        addresses("localhost")


def test_url_launcher_says_when_nothing_answers():
    port = free_port()
    assert UrlLauncher.unavailable(f"127.0.0.1:{port}") == f"no Triton server answers at http://127.0.0.1:{port}"
    assert UrlLauncher.unavailable("nonsense").startswith("--triton-url:")


def test_server_log_error_lines(tmp_path):
    log = ServerLog(tmp_path / "server.log")
    assert log.errors() == [] and log.mark() == 0
    log.path.write_text(
        'I1129 07:25:46.904453 4230 model_lifecycle.cc:839] "successfully loaded \'convnet\'"\n'
        "[libprotobuf ERROR /src/text_format.cc:337] Error parsing text-format inference.ModelConfig: 5:66: "
        'Message type "inference.ModelOutput" has no field named "bogus_field".\n'
    )
    mark = log.mark()
    with log.path.open("a") as f:
        f.write('E1129 07:25:50.126086 4230 model_repository_manager.cc:1460] "Poll failed for model directory '
                "'broken': failed to read text proto from /r/broken/config.pbtxt\"\n" * 2)
    assert log.errors() == [
        'Error parsing text-format inference.ModelConfig: 5:66: Message type "inference.ModelOutput" has no '
        'field named "bogus_field".',
        "Poll failed for model directory 'broken': failed to read text proto from /r/broken/config.pbtxt",
    ]
    assert log.errors(mark) == log.errors()[1:]


def test_cli_refuses_url_without_address():
    run = subprocess.run([sys.executable, "-m", "compatcheck", "run", "models/convnet.py", "--triton", "url"],
                         capture_output=True, text=True, timeout=60, cwd=ROOT,
                         env={**os.environ, "COLUMNS": "200"})
    assert run.returncode == 2 and "--triton url needs --triton-url" in run.stderr
