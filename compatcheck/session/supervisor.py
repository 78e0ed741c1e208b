"""The parent side: runs the stages in worker processes, survives their crashes and hangs.

One worker runs every stage of a lane, so torch is imported once per lane when nothing goes
wrong. When a stage crashes (the worker dies) or outlives --timeout (the worker is killed with
its whole process group), the stage gets its verdict and a fresh worker continues with the next
one, reusing the artifacts already on disk. Independent lanes (torch.compile, TorchScript, ONNX)
run in up to --jobs workers side by side, as many as memory holds (workers.py).
"""

from __future__ import annotations

import json
import os
import resource
import selectors
import signal
import subprocess
import sys
import threading
import time
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path
from typing import Callable

from compatcheck import host, ladder, redact, untrusted
from compatcheck.session import workers
from compatcheck.session.containment import Box, Containment
from compatcheck.session.sandbox import Sandbox, enter
from compatcheck.errors import UsageError
from compatcheck.options import RunOptions
from compatcheck.protocol import MESSAGE, Done, Loaded, Step, WorkerRequest
from compatcheck.report import verdict
from compatcheck.report.model import PhaseRecord, StageResult
from compatcheck.report.verdict import Evidence
from compatcheck.session.outcome import Outcome

LOG_TAIL = 2000
# How often a silent worker is checked for having exited: a process it started may hold the
# message pipe open, so the pipe's end is no sign of its death.
EXIT_POLL_S = 0.2


class _Messages:
    """JSON lines from the worker's message pipe, with a deadline per read."""

    def __init__(self, fd: int):
        self.fd = fd
        self.buffer = b""
        self.selector = selectors.DefaultSelector()
        self.selector.register(fd, selectors.EVENT_READ)

    def next(self, deadline: float, process: subprocess.Popen):
        """A message (protocol.Message, secrets redacted, lone surrogates replaced), None once the worker is
        gone and nothing is left to read, or 'timeout'."""
        while b"\n" not in self.buffer:
            remaining = deadline - time.monotonic()
            if remaining <= 0:
                return "timeout"
            if not self.selector.select(min(remaining, EXIT_POLL_S)):
                if process.poll() is not None and not self.selector.select(0):
                    return None
                continue
            chunk = os.read(self.fd, 65536)
            if not chunk:
                return None
            self.buffer += chunk
        line, self.buffer = self.buffer.split(b"\n", 1)
        return MESSAGE.validate_python(untrusted.encodable(redact.tree(json.loads(line))))

    def close(self) -> None:
        self.selector.close()
        os.close(self.fd)


def _describe_exit(code: int | None) -> str:
    if code is not None and code < 0:
        try:
            return f"the worker was killed by {signal.Signals(-code).name}"
        except ValueError:
            return f"the worker was killed by signal {-code}"
    return f"the worker exited with status {code}"


def _log_tail(log: Path) -> str:
    try:
        return redact.file_tail(log, LOG_TAIL)[0]
    except OSError:
        return ""


def _kill_group(process: subprocess.Popen) -> None:
    try:
        os.killpg(process.pid, signal.SIGKILL)  # the group outlives its leader while children remain
    except ProcessLookupError:
        pass
    process.wait()


class _Watch:
    """What the supervisor knows of the worker's current stage: which phase it is in since when, and
    when the worker is to be killed."""

    def __init__(self, timeout: float):
        self.timeout = timeout
        self.stage: str | None = None
        self.phase: str | None = None
        self.budget: float | None = None
        self.doing = ""  # the current stage's last step, in words: where a timeout or crash came
        self.started = self.phase_started = time.monotonic()
        self.deadline = self.started + timeout

    def step(self, message: Step) -> None:
        if message.stage != self.stage:
            return
        self.doing = f" {message.what}"
        if message.phase is not None:
            self.phase, self.phase_started = message.phase, time.monotonic()
            self.budget = message.kill_after
            self.deadline = self.phase_started + (message.kill_after or self.timeout)

    def event(self, kind: str, stage: str) -> None:
        """A stage started (its clock starts) or ended."""
        self.stage = stage if kind == "start" else None
        self.phase, self.budget, self.doing = None, None, ""
        self.started = self.phase_started = time.monotonic()
        self.deadline = self.started + self.timeout


class Supervisor:
    def __init__(self, model: Path, factory: str, options: RunOptions, workdir: Path,
                 on_event: Callable[[str, str, StageResult | None], None] | None = None, jobs: int = 1,
                 done: dict[str, StageResult] | None = None, artifacts: dict[str, str] | None = None,
                 payload: Path | None = None, rewritten: Path | None = None):
        self.model = model
        self.rewritten = rewritten  # `compatcheck fix`'s rewritten copy of the model file, run in its place
        self.factory = factory
        self.payload = payload  # a model object's payload file (payload.py), loaded instead of the model file
        self.options = options
        self.workdir = workdir
        self.on_event = on_event or (lambda kind, stage, result: None)
        self.jobs = jobs
        self.lock = threading.Lock()
        self.processes: set[subprocess.Popen] = set()
        self.stopping = False
        self.cores: int | None = None  # each worker's share of the cores, when several run side by side
        self.started: list[threading.Event] = []  # with several lanes: each lane's go-ahead (workers.py)
        self.containment: Containment | None = None
        self.sandbox = Sandbox.here()
        # Filled as results arrive, so an interrupted run keeps what it has.
        self.outcome = Outcome(results=dict(done or {}), artifacts=dict(artifacts or {}),
                               key_reach=self.sandbox.describe())

    def run(self) -> Outcome:
        todo = [name for name in self.options.stages if name not in self.outcome.results]
        lanes = ladder.lanes(todo, self.jobs)
        if len(lanes) <= 1:
            for lane in lanes:
                self._run_lane(lane, 0)
            return self.outcome
        self.cores = max(1, host.cores() // len(lanes))
        self.started = [threading.Event() for _ in lanes]  # each lane's go-ahead: the first has it at once
        self.started[0].set()
        with ThreadPoolExecutor(len(lanes)) as pool:
            futures = [pool.submit(self._run_lane, lane, index) for index, lane in enumerate(lanes)]
            try:
                for future in futures:
                    future.result()
            except BaseException:
                self.stop()
                raise
        return self.outcome

    def _run_lane(self, remaining: list[str], lane: int) -> None:
        if self.started:
            self.started[lane].wait()
        first = True
        try:
            while remaining and not self.stopping:
                self._run_worker(remaining, lane, first)
                first = False
        finally:
            if lane == 0 and self.started:
                self._let_lanes_start(len(self.started))  # what the first could not load, no other will
            if lane + 1 < len(self.started) and not self.started[lane + 1].is_set():
                self.started[lane + 1].set()  # the lane memory held back runs once this one has ended

    def _let_lanes_start(self, allowed: int) -> None:
        """Let the lanes after the first start, `allowed` of them at once (the first included); the others
        each wait for the lane before them to end. Without a loaded model, none runs."""
        if self.outcome.model is None:
            self.stopping = True
        for started in self.started[1:allowed]:
            started.set()

    def _loaded(self, footprint: int | None) -> None:
        """The first worker has loaded the model: as many lanes start as memory holds workers of its size."""
        if self.started and not self.started[1].is_set():
            self._let_lanes_start(workers.memory_allows(len(self.started), footprint, workers.available_memory()))

    def _box(self) -> Box:
        with self.lock:
            if self.containment is None:
                self.containment = Containment(self.workdir)
            return self.containment.box()

    def _spawn(self, request: WorkerRequest, lane: int) -> tuple[subprocess.Popen, _Messages, Box]:
        request_path = self.workdir / f"worker-request-{lane}.json"
        request_path.write_text(request.model_dump_json())
        read_fd, write_fd = os.pipe()
        log = open(self.workdir / f"worker-{lane}.log", "ab")
        box = self._box()
        parent, limit = os.getpid(), self.options.memory_limit
        env = {**self.sandbox.environment(dict(os.environ), self.workdir), **box.env}
        ruleset = self.sandbox.ruleset()  # the folders as they are now: what the worker may reach

        def prepare():  # in the worker, before exec
            box.enter(parent)
            if limit:
                resource.setrlimit(resource.RLIMIT_DATA, (limit * 2**20, limit * 2**20))
            enter(ruleset)

        try:
            process = subprocess.Popen(
                [sys.executable, "-m", "compatcheck.worker", str(request_path), str(write_fd)],
                stdin=subprocess.DEVNULL, stdout=log, stderr=subprocess.STDOUT, pass_fds=(write_fd,),
                start_new_session=True,  # its own process group: Ctrl-C reaches us, and we kill it whole
                preexec_fn=prepare, env=env,
            )
        finally:
            os.close(write_fd)
            if ruleset is not None:
                os.close(ruleset)
            log.close()
        with self.lock:
            self.processes.add(process)
            self.outcome.workers += 1
        return process, _Messages(read_fd), box

    def _run_worker(self, remaining: list[str], lane: int, first: bool) -> None:
        model = {"model": str(self.model), "factory": self.factory,
                 "rewritten": str(self.rewritten) if self.rewritten else None}
        if self.payload:
            model.update(payload=str(self.payload), sys_path=[os.path.abspath(entry or ".") for entry in sys.path])
        with self.lock:
            request = self.outcome.request(remaining, self.options, self.workdir, save_inputs=first and lane == 0,
                                           sandbox=self.sandbox.folders(), cores=self.cores, **model)
        process, messages, box = self._spawn(request, lane)
        log = self.workdir / f"worker-{lane}.log"
        watch = _Watch(self.options.timeout)
        try:
            while True:
                message = messages.next(watch.deadline, process)
                if message == "timeout":
                    _kill_group(process)
                    if watch.stage is None:
                        raise UsageError(f"loading the model took longer than --timeout {self.options.timeout:g}s")
                    self._ended(remaining, watch, "timeout", f"the worker was killed{watch.doing}")
                    return
                if message is None:
                    code = process.wait()
                    if self.stopping:
                        return
                    if watch.stage is None:
                        if self.outcome.model is None:
                            raise UsageError(self._load_failure(_describe_exit(code), _log_tail(log)))
                        watch.stage = remaining[0]
                    self._ended(remaining, watch, "crash", _describe_exit(code) + watch.doing, _log_tail(log))
                    return
                if isinstance(message, Done):
                    return
                if isinstance(message, Step):
                    watch.step(message)
                    continue
                with self.lock:
                    event = self.outcome.receive(message, lane)
                if isinstance(message, Loaded) and lane == 0:
                    self._loaded(message.footprint)
                if event is None:
                    continue
                kind, stage, result = event
                watch.event(kind, stage)
                if kind == "result":
                    remaining.remove(stage)
                self.on_event(kind, stage, result)
        finally:
            messages.close()
            _kill_group(process)
            box.end()  # what the model started outside the group, or that outlived the worker
            with self.lock:
                self.processes.discard(process)

    def _ended(self, remaining, watch: "_Watch", how: str, why: str, detail: str | None = None) -> None:
        """The current stage's result when its worker died or was killed: the verdict it was already
        judged to have, with the phase that did not end; else a crash or timeout of its own."""
        stage, seconds = watch.stage, time.monotonic() - watch.started
        judged = self.outcome.judged.get(stage)
        if judged is not None and watch.phase not in (None, "build"):
            result, evidence = judged
            said = (f"was cut short: the worker was killed after {watch.budget:g}s{watch.doing}" if how == "timeout"
                    else f"ended with its worker: {why}")
            evidence.phases.append(PhaseRecord(
                name=watch.phase, outcome="timed-out" if how == "timeout" else "crashed",
                seconds=round(time.monotonic() - watch.phase_started, 3), budget=watch.budget,
                note=f"the {watch.phase} phase {said}; what it would have found is missing"))
            result = verdict.rejudged(result, evidence)
        else:
            if how == "timeout":
                why = f"no result after --timeout {self.options.timeout:g}s; {why}"
            result = verdict.result(stage, Evidence(ended=how, ended_why=why), seconds=round(seconds, 3),
                                    error=detail)
        with self.lock:
            self.outcome.results[stage] = result
        remaining.remove(stage)
        self.on_event("result", stage, result)

    def _load_failure(self, why: str, log: str) -> str:
        """One line on a worker that died before it loaded the model."""
        last = [line.strip() for line in log.splitlines() if line.strip()]
        said = f": {last[-1][-300:]}" if last else " without a word of output"
        if self.options.memory_limit:
            said += f" (under --memory-limit {self.options.memory_limit}M: try a larger one)"
        return f"{why} while loading the model{said}"

    def stop(self) -> None:
        """Kill every worker and everything it started (compile workers, servers), and reap them."""
        self.stopping = True
        with self.lock:
            processes = list(self.processes)
        for process in processes:
            _kill_group(process)
        with self.lock:
            containment, self.containment = self.containment, None
        if containment is not None:
            containment.close()
