"""What every launcher shares: free ports, the server log, the readiness wait and a stop that always runs.

A launcher is a context manager: `with launcher as (http_url, grpc_url): ...` stops the server on
success, failure, exception and Ctrl-C. Servers started here are children of the calling process in its
process group, so whoever kills that group (compatcheck's supervisor on timeout or Ctrl-C) kills them too.
"""

from __future__ import annotations

import os
import re
import signal
import socket
import subprocess
import threading
import time
import urllib.request
from pathlib import Path

from compatcheck.triton.errors import TritonError

PORT_TRIES = 3  # fresh ports to try when another process takes one between choosing and binding it
WATCH_INTERVAL = 0.5  # seconds between looks at a running server and the processes it started
EXIT_TIMEOUT = 5  # --exit-timeout-secs: how long the server waits for in-flight requests when stopping
# Flags every server gets: explicit model control (models are loaded through the API, which answers
# with the reason a load failed), configs used exactly as written, nothing listening that we do not use.
SERVER_FLAGS = (
    "--model-control-mode=explicit", "--disable-auto-complete-config", "--strict-readiness=true",
    f"--exit-timeout-secs={EXIT_TIMEOUT}", "--allow-metrics=false", "--allow-sagemaker=false",
    "--allow-vertex-ai=false",
)
# Log lines after which a model cannot finish loading (its Python stub did not start): it would stay
# LOADING forever.
FATAL = ("Failed to preinitialize Python stub", "error while loading shared libraries")
_GLOG_ERROR = re.compile(r'^E\d{4} [\d:.]+ +\d+ [^\]]+\] "?(.*?)"?$')
_PROTOBUF_ERROR = re.compile(r"^\[libprotobuf ERROR [^\]]*\] (.*)$")
# A bind that failed: tritonserver's "Socket '127.0.0.1:PORT' already in use", docker's "Bind for
# 127.0.0.1:PORT failed: port is already allocated".
_PORT_TAKEN = re.compile(r"already (?:in use|allocated)")


def free_port() -> int:
    """A port nobody listens on now; the server may still lose it, which the readiness wait notices."""
    with socket.socket() as probe:
        probe.bind(("127.0.0.1", 0))
        return probe.getsockname()[1]


# Straight to the server, as tritonclient goes: no proxy from the environment.
_DIRECT = urllib.request.build_opener(urllib.request.ProxyHandler({}))


def http_ok(url: str, path: str) -> bool:
    try:
        with _DIRECT.open(f"http://{url}{path}", timeout=2) as answer:
            return answer.status == 200
    except OSError:
        return False


class ServerLog:
    """The server's stdout and stderr, in a file; read back for readiness, failures and load reasons."""

    def __init__(self, path: Path):
        self.path = path

    def mark(self) -> int:
        return self.path.stat().st_size if self.path.exists() else 0

    def text(self, since: int = 0) -> str:
        try:
            with self.path.open("rb") as f:
                f.seek(since)
                return f.read().decode(errors="replace")
        except OSError:
            return ""

    def errors(self, since: int = 0) -> list[str]:
        """The error lines logged since `since`, without their prefixes, each once."""
        found = []
        for line in self.text(since).splitlines():
            match = _GLOG_ERROR.match(line) or _PROTOBUF_ERROR.match(line)
            if match and match.group(1) not in found:
                found.append(match.group(1))
        return found

    def tail(self, lines: int = 15) -> str:
        return "\n".join(self.text().splitlines()[-lines:])


class Launcher:
    kind = ""
    native = True  # serves the onnxruntime and pytorch backends; else only the Python backend
    remote = False  # cannot see our disk: models are loaded with their files in the request
    ready_timeout = 120.0
    ready_seconds: float | None = None  # from start to ready, for servers we start

    def start(self) -> tuple[str, str]:
        """Start (or reach) the server; return its HTTP and gRPC addresses once it is ready."""
        raise NotImplementedError

    def stop(self) -> None:
        """Stop the server and everything it started; safe to call twice."""

    def check(self) -> None:
        """Raise TritonError when the server is gone or has logged that it cannot go on."""

    def log_mark(self) -> int:
        return 0

    def log_errors(self, since: int) -> list[str]:
        return []

    def describe(self) -> str:
        return self.kind

    def __enter__(self) -> tuple[str, str]:
        try:
            return self.start()
        except BaseException:
            self.stop()
            raise

    def __exit__(self, *exc) -> None:
        self.stop()


class ProcessLauncher(Launcher):
    """A server run as a child process whose output goes to a log file (tritonserver, or docker run)."""

    listening_host = "127.0.0.1"  # the address the server reports it listens on, in its log

    def __init__(self, workdir: Path):
        self.workdir = workdir
        self.log = ServerLog(workdir / "server.log")
        self.process: subprocess.Popen | None = None
        self.ports: tuple[int, int] | None = None
        self.family: dict[int, str | None] = {}  # pid -> start time of what the server started, from _watch

    def command(self, http_port: int, grpc_port: int) -> list[str]:
        raise NotImplementedError

    def environment(self) -> dict[str, str] | None:
        return None

    def server_ports(self, http_port: int, grpc_port: int) -> tuple[int, int]:
        """The ports the server itself listens on (inside a container they are not the host's)."""
        return http_port, grpc_port

    def start(self) -> tuple[str, str]:
        self.workdir.mkdir(parents=True, exist_ok=True)
        started = time.monotonic()
        for tries in range(1, PORT_TRIES + 1):
            self.ports = (free_port(), free_port())
            with self.log.path.open("wb") as log:
                self.process = subprocess.Popen(
                    self.command(*self.ports), stdin=subprocess.DEVNULL, stdout=log, stderr=subprocess.STDOUT,
                    env=self.environment(),
                )
            http_url, grpc_url = (f"127.0.0.1:{port}" for port in self.ports)
            try:
                self._wait_ready(http_url, started)
                break
            except TritonError:
                taken = self._port_taken()
                if taken is None:
                    raise
                self.stop()
                if tries == PORT_TRIES:
                    raise TritonError(f"{self.describe()} could not listen on 127.0.0.1:{taken}: another process "
                                      f"holds it (tried {PORT_TRIES} pairs of free ports)") from None
        self.ready_seconds = time.monotonic() - started
        threading.Thread(target=self._watch, args=(self.process,), name="watch tritonserver", daemon=True).start()
        return http_url, grpc_url

    def _port_taken(self) -> int | None:
        """The port of ours that the server, now exited, could not bind because another process holds it."""
        if self.process is None or self.process.poll() is None:
            return None
        for line in self.log.text().splitlines():
            if _PORT_TAKEN.search(line):
                for port in self.ports:
                    if re.search(rf":{port}\b", line):
                        return port
        return None

    def _wait_ready(self, http_url: str, started: float) -> None:
        # Ready means our process is alive, says it listens on our ports, holds them, and answers: a port
        # can be taken between free_port() and the server binding it, and tritonserver logs "Started
        # HTTPService" even when that bind then fails, while the other process answers on the port.
        http_port, grpc_port = self.server_ports(*self.ports)
        host = self.listening_host
        wanted = (f"Started HTTPService at {host}:{http_port}", f"Started GRPCInferenceService at {host}:{grpc_port}")
        while True:
            self.check()
            text = self.log.text()
            if all(line in text for line in wanted) and self.holds_ports() and http_ok(http_url, "/v2/health/ready"):
                return
            if time.monotonic() - started > self.ready_timeout:
                raise TritonError(
                    f"{self.describe()} was not ready after {self.ready_timeout:g}s; its log ends:\n{self.log.tail()}"
                )
            time.sleep(0.05)

    def holds_ports(self) -> bool:
        """Whether every socket listening on our ports is the server process's own."""
        ours = socket_inodes(self.process.pid)
        return all(listening and listening <= ours for listening in map(listening_inodes, self.ports))

    def _watch(self, process: subprocess.Popen) -> None:
        """While the server runs, remember the processes it started; when it dies, kill them: they hold
        copies of its sockets, so a request in flight would wait for an answer that never comes, and they
        outlive it (the Python backend's stub, for a minute or more)."""
        while self.process is process:
            if process.poll() is not None:
                self._kill_family()
                return
            for pid in descendants(process.pid):
                self.family.setdefault(pid, _started(pid))
            time.sleep(WATCH_INTERVAL)

    def _kill_family(self) -> None:
        for pid, started in list(self.family.items()):
            if started is not None and _started(pid) == started:  # not a newer process with a reused pid
                _kill(pid)

    def check(self) -> None:
        if self.process is not None and self.process.poll() is not None:
            status = self.process.returncode
            how = f"was killed by {signal.Signals(-status).name}" if status < 0 else f"exited with status {status}"
            raise TritonError(f"{self.describe()} {how}; its log ends:\n{self.log.tail()}")
        for line in self.log.text().splitlines():
            if any(fatal in line for fatal in FATAL):
                raise TritonError(f"{self.describe()}: {line.strip()}")

    def log_mark(self) -> int:
        return self.log.mark()

    def log_errors(self, since: int) -> list[str]:
        return self.log.errors(since)

    def stop(self) -> None:
        process, self.process = self.process, None
        if process is None:
            return
        if process.poll() is not None:
            self._kill_family()  # it died: what it started is left to us
            return
        self.terminate(process)
        try:
            process.wait(EXIT_TIMEOUT + 10)
        except subprocess.TimeoutExpired:
            for pid in descendants(process.pid):
                _kill(pid)
            process.kill()
            process.wait()

    def terminate(self, process: subprocess.Popen) -> None:
        process.send_signal(signal.SIGTERM)


def descendants(pid: int) -> list[int]:
    """Every live process below `pid`, from /proc (tritonserver's Python stubs, for one)."""
    children: dict[int, list[int]] = {}
    for entry in os.listdir("/proc"):
        if entry.isdigit():
            try:
                stat = Path(f"/proc/{entry}/stat").read_text()
            except OSError:
                continue
            parent = int(stat.rpartition(")")[2].split()[1])
            children.setdefault(parent, []).append(int(entry))
    found, todo = [], [pid]
    while todo:
        for child in children.get(todo.pop(), []):
            found.append(child)
            todo.append(child)
    return found


def _started(pid: int) -> str | None:
    """When the process started (clock ticks since boot), or None when it is gone."""
    try:
        return Path(f"/proc/{pid}/stat").read_text().rpartition(")")[2].split()[19]
    except OSError:
        return None


def listening_inodes(port: int) -> set[str]:
    """The inodes of the TCP sockets listening on `port`, from /proc/net/tcp and tcp6."""
    found = set()
    for table in ("/proc/net/tcp", "/proc/net/tcp6"):
        try:
            rows = Path(table).read_text().splitlines()[1:]
        except OSError:
            continue
        for fields in map(str.split, rows):
            if fields[3] == "0A" and int(fields[1].rpartition(":")[2], 16) == port:  # 0A: LISTEN
                found.add(fields[9])
    return found


def socket_inodes(pid: int) -> set[str]:
    """The inodes of the sockets the process has open."""
    found = set()
    try:
        fds = os.listdir(f"/proc/{pid}/fd")
    except OSError:
        return found
    for fd in fds:
        try:
            target = os.readlink(f"/proc/{pid}/fd/{fd}")
        except OSError:
            continue
        if target.startswith("socket:["):
            found.add(target[8:-1])
    return found


def _kill(pid: int) -> None:
    try:
        os.kill(pid, signal.SIGKILL)
    except ProcessLookupError:
        pass
