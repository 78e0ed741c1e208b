"""The parent side: runs the stages in worker processes, survives their crashes and hangs.

One worker runs every remaining stage, so torch is imported once when nothing goes wrong. When
a stage crashes (the worker dies) or outlives --timeout (the worker is killed with its whole
process group), the stage gets its verdict and a fresh worker continues with the next one,
reusing the artifacts already on disk.
"""

from __future__ import annotations

import json
import os
import selectors
import signal
import subprocess
import sys
import time
from dataclasses import dataclass, field
from pathlib import Path
from typing import Callable

from compatcheck.errors import UsageError
from compatcheck.options import RunOptions
from compatcheck.report.model import ModelInfo, StageResult, Status

LOG_TAIL = 2000


@dataclass
class Outcome:
    model: ModelInfo | None = None
    environment: dict = field(default_factory=dict)
    results: dict[str, StageResult] = field(default_factory=dict)
    workers: int = 0


class _Messages:
    """JSON lines from the worker's message pipe, with a deadline per read."""

    def __init__(self, fd: int):
        self.fd = fd
        self.buffer = b""
        self.selector = selectors.DefaultSelector()
        self.selector.register(fd, selectors.EVENT_READ)

    def next(self, deadline: float) -> dict | None | str:
        """A message, None at end of stream, or 'timeout'."""
        while b"\n" not in self.buffer:
            remaining = deadline - time.monotonic()
            if remaining <= 0 or not self.selector.select(remaining):
                return "timeout"
            chunk = os.read(self.fd, 65536)
            if not chunk:
                return None
            self.buffer += chunk
        line, self.buffer = self.buffer.split(b"\n", 1)
        return json.loads(line)

    def close(self) -> None:
        self.selector.close()
        os.close(self.fd)


def _describe_exit(code: int | None) -> str:
    if code is None:
        return "the worker stopped answering"
    if code < 0:
        try:
            return f"the worker was killed by {signal.Signals(-code).name}"
        except ValueError:
            return f"the worker was killed by signal {-code}"
    return f"the worker exited with status {code}"


def _log_tail(log: Path) -> str:
    try:
        with log.open("rb") as f:
            f.seek(0, os.SEEK_END)
            f.seek(max(f.tell() - LOG_TAIL, 0))
            return f.read().decode(errors="replace")
    except OSError:
        return ""


class Supervisor:
    def __init__(self, model: Path, factory: str, options: RunOptions, workdir: Path, keep_artifacts: bool,
                 on_event: Callable[[str, str, StageResult | None], None] | None = None):
        self.model = model
        self.factory = factory
        self.options = options
        self.workdir = workdir
        self.keep_artifacts = keep_artifacts
        self.on_event = on_event or (lambda kind, stage, result: None)
        self.process: subprocess.Popen | None = None
        self.outcome = Outcome()  # filled as results arrive, so an interrupted run keeps what it has

    def run(self) -> Outcome:
        remaining = list(self.options.stages)
        artifacts: dict[str, str] = {}
        first = True
        while remaining:
            self._run_worker(self.outcome, remaining, artifacts, first)
            first = False
        return self.outcome

    def _spawn(self, request: dict) -> tuple[subprocess.Popen, _Messages]:
        request_path = self.workdir / "worker-request.json"
        request_path.write_text(json.dumps(request))
        read_fd, write_fd = os.pipe()
        log = open(self.workdir / "worker.log", "ab")
        try:
            process = subprocess.Popen(
                [sys.executable, "-m", "compatcheck.worker", str(request_path), str(write_fd)],
                stdin=subprocess.DEVNULL, stdout=log, stderr=subprocess.STDOUT, pass_fds=(write_fd,),
                start_new_session=True,  # its own process group: Ctrl-C reaches us, and we kill it whole
            )
        finally:
            os.close(write_fd)
            log.close()
        self.process = process
        return process, _Messages(read_fd)

    def _run_worker(self, outcome: Outcome, remaining: list[str], artifacts: dict, first: bool) -> None:
        request = {
            "model": str(self.model), "factory": self.factory, "options": self.options.model_dump(),
            "stages": remaining, "artifacts": artifacts, "workdir": str(self.workdir),
            "previous": {name: r.status.value for name, r in outcome.results.items()},
            "keep_artifacts": self.keep_artifacts and first,
        }
        process, messages = self._spawn(request)
        outcome.workers += 1
        current: str | None = None
        started = time.monotonic()
        deadline = started + self.options.timeout
        try:
            while True:
                message = messages.next(deadline)
                if message == "timeout":
                    self.stop()
                    if current is None:
                        raise UsageError(f"loading the model took longer than --timeout {self.options.timeout:g}s")
                    self._record(outcome, remaining, current, Status.TIMEOUT, time.monotonic() - started,
                                 f"no result after --timeout {self.options.timeout:g}s; the worker was killed")
                    return
                if message is None:
                    code = process.wait()
                    why = _describe_exit(code)
                    if current is None:
                        if outcome.model is None:
                            raise UsageError(f"{why} while loading the model: {_log_tail(self.workdir / 'worker.log').strip()[-300:]}")
                        current = remaining[0]
                    self._record(outcome, remaining, current, Status.CRASH, time.monotonic() - started, why,
                                 _log_tail(self.workdir / "worker.log"))
                    return
                kind = message["type"]
                if kind == "usage_error":
                    raise UsageError(message["message"])
                if kind == "loaded":
                    if outcome.model is None:
                        outcome.model = ModelInfo.model_validate(message["model"])
                        outcome.environment = message["environment"]
                    deadline = time.monotonic() + self.options.timeout
                elif kind == "start":
                    current = message["stage"]
                    started = time.monotonic()
                    deadline = started + self.options.timeout
                    self.on_event("start", current, None)
                elif kind == "result":
                    result = StageResult.model_validate(message["result"])
                    artifacts.update(message["artifacts"])
                    outcome.results[result.name] = result
                    remaining.remove(result.name)
                    current = None
                    self.on_event("result", result.name, result)
                    deadline = time.monotonic() + self.options.timeout
                elif kind == "done":
                    process.wait()
                    return
        finally:
            messages.close()
            self.stop()

    def _record(self, outcome, remaining, stage, status, seconds, reason, detail=None) -> None:
        result = StageResult(name=stage, status=status, seconds=round(seconds, 3), reason=reason, error=detail)
        outcome.results[stage] = result
        remaining.remove(stage)
        self.on_event("result", stage, result)

    def stop(self) -> None:
        """Kill the worker and everything it started (compile workers, servers), and reap it."""
        process, self.process = self.process, None
        if process is None:
            return
        try:
            os.killpg(process.pid, signal.SIGKILL)  # the group outlives its leader while children remain
        except ProcessLookupError:
            pass
        process.wait()
