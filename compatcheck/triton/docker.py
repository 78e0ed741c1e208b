"""`--triton docker`: the official tritonserver image, run with the docker CLI.

The repository is mounted read-only and the ports are published on 127.0.0.1 only (inside the
container the server listens on all of the container's addresses, or the published ports would reach
nothing). `docker run` stays in the foreground as our child, so its exit shows and the server log is
its output. Killing the docker CLI does not stop a container, so a reaper started in its own session
waits for our end of a pipe to close (at stop(), or when this process dies however it dies) and then
removes the container.
"""

from __future__ import annotations

import shutil
import subprocess
import uuid
from pathlib import Path

from compatcheck.triton.launcher import EXIT_TIMEOUT, SERVER_FLAGS, ProcessLauncher

CONTAINER_REPOSITORY = "/models"
HTTP_PORT, GRPC_PORT = 8000, 8001  # the server's ports inside the container


def docker_cli() -> str | None:
    return shutil.which("docker")


class DockerLauncher(ProcessLauncher):
    kind = "docker"
    listening_host = "0.0.0.0"
    ready_timeout = 180.0  # a cold container with GPUs takes a while

    def __init__(self, repository: Path, workdir: Path, image: str, *, gpus: bool = False, docker: str = "docker"):
        super().__init__(workdir)
        self.repository = repository
        self.image = image
        self.gpus = gpus
        self.docker = docker
        self.name = f"compatcheck-triton-{uuid.uuid4().hex[:12]}"
        self.reaper: subprocess.Popen | None = None

    @staticmethod
    def unavailable(image: str) -> str | None:
        docker = docker_cli()
        if docker is None:
            return "no docker CLI on PATH"
        try:
            engine = subprocess.run([docker, "version", "--format", "{{.Server.Version}}"],
                                    capture_output=True, text=True, timeout=20)
        except subprocess.TimeoutExpired:
            return "no docker engine answered `docker version` within 20s"
        if engine.returncode != 0:
            why = next((line for line in engine.stderr.splitlines() if line.strip()), "no answer")
            return f"no docker engine reachable: {why.strip()}"
        if subprocess.run([docker, "image", "inspect", image], capture_output=True, timeout=20).returncode != 0:
            return f"image {image} is not on this machine; run `docker pull {image}` first"
        return None

    def describe(self) -> str:
        return f"container {self.name} ({self.image})"

    def server_ports(self, http_port: int, grpc_port: int) -> tuple[int, int]:
        return HTTP_PORT, GRPC_PORT

    def holds_ports(self) -> bool:
        return True  # docker's proxy holds the host's ports, and docker starts no container it cannot publish

    def command(self, http_port: int, grpc_port: int) -> list[str]:
        return [
            self.docker, "run", "--rm", "--name", self.name, "--label", "compatcheck=triton",
            *(["--gpus", "all"] if self.gpus else []),
            "--publish", f"127.0.0.1:{http_port}:{HTTP_PORT}", "--publish", f"127.0.0.1:{grpc_port}:{GRPC_PORT}",
            "--volume", f"{self.repository.resolve()}:{CONTAINER_REPOSITORY}:ro",
            self.image, "tritonserver", f"--model-repository={CONTAINER_REPOSITORY}",
            f"--http-port={HTTP_PORT}", f"--grpc-port={GRPC_PORT}", *SERVER_FLAGS,
        ]

    def reaper_command(self) -> list[str]:
        return ["sh", "-c", 'cat >/dev/null; exec "$1" rm --force "$2" >/dev/null 2>&1',
                "compatcheck-reaper", self.docker, self.name]

    def stop_command(self) -> list[str]:
        return [self.docker, "stop", "--time", str(EXIT_TIMEOUT), self.name]

    def start(self) -> tuple[str, str]:
        # The reaper first: from here on, however this process ends, the container goes.
        self.reaper = subprocess.Popen(self.reaper_command(), stdin=subprocess.PIPE, stdout=subprocess.DEVNULL,
                                       stderr=subprocess.DEVNULL, start_new_session=True)
        return super().start()

    def terminate(self, process: subprocess.Popen) -> None:
        try:
            subprocess.run(self.stop_command(), capture_output=True, timeout=EXIT_TIMEOUT + 30)
        except subprocess.TimeoutExpired:
            pass  # the CLI is killed next, and the reaper removes the container

    def stop(self) -> None:
        try:
            super().stop()
        finally:
            reaper, self.reaper = self.reaper, None
            if reaper is not None:
                reaper.stdin.close()  # the reaper removes the container, if `docker stop` left one
                try:
                    reaper.wait(60)
                except subprocess.TimeoutExpired:
                    pass  # a slow engine: the reaper, in its own session, finishes on its own
