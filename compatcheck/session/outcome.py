"""What the workers of one run have said so far, and the one place their messages are taken in.

The supervisor (worker processes) and the in-process runner both build their requests here and hand
every message to `receive`, so the two runners cannot drift apart.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from pathlib import Path

from compatcheck.errors import InternalError, UsageError
from compatcheck.protocol import (Finished, InternalErrorMessage, Judged, Loaded, SandboxFolders, Started,
                                  UsageErrorMessage, WorkerRequest)
from compatcheck.report import verdict
from compatcheck.report.model import ModelInfo, StageResult, blocker
from compatcheck.report.verdict import Evidence


@dataclass
class Outcome:
    model: ModelInfo | None = None
    environment: dict = field(default_factory=dict)
    results: dict[str, StageResult] = field(default_factory=dict)
    artifacts: dict[str, str] = field(default_factory=dict)
    dependencies: dict[str, dict] = field(default_factory=dict)  # per computed stage: the worker's manifest
    producers: dict[str, int] = field(default_factory=dict)  # per computed stage: the lane whose worker ran it
    workers: int = 0
    key_reach: str | None = None  # whether the model under test could reach the cache's key, in words
    # per stage still running: the verdict its worker sent, and the evidence it was judged from
    judged: dict[str, tuple[StageResult, Evidence]] = field(default_factory=dict)

    def request(self, stages: list[str], options, workdir: Path, *, save_inputs: bool,
                sandbox: SandboxFolders | None = None, cores: int | None = None, **model) -> WorkerRequest:
        """A worker's request for `stages`, with what earlier workers made and concluded and where its
        sandbox refuses new entries; `model` names the model (model and factory, or payload and sys_path)."""
        return WorkerRequest(
            **model, options=options.model_dump(mode="json"), stages=list(stages), workdir=str(workdir),
            artifacts=dict(self.artifacts), previous={name: r.status.value for name, r in self.results.items()},
            blockers={name: blocker(r.findings) for name, r in self.results.items()}, save_inputs=save_inputs,
            sandbox=sandbox or SandboxFolders(), cores=cores)

    def receive(self, message, lane: int) -> tuple[str, str, StageResult | None] | None:
        """Take one message from the worker of `lane`; returns the event to tell the caller about
        (start or result), if any. A usage error stops the run, and so does an internal error outside any
        stage; one in a stage is that stage's result."""
        if isinstance(message, UsageErrorMessage):
            raise UsageError(message.message)
        if isinstance(message, InternalErrorMessage):
            if message.stage is None:
                raise InternalError(message.message, message.traceback)
            message = Finished(result=verdict.result(message.stage, Evidence(internal=message.message),
                                                     error=message.traceback), artifacts={})
        if isinstance(message, Loaded):
            if self.model is None:
                self.model, self.environment = message.model, message.environment
        elif isinstance(message, Judged):
            self.judged[message.result.name] = (message.result, message.evidence)
        elif isinstance(message, Started):
            return "start", message.stage, None
        elif isinstance(message, Finished):
            result = message.result
            self.judged.pop(result.name, None)
            self.artifacts.update(message.artifacts)
            self.results[result.name] = result
            if message.dependencies:
                self.dependencies[result.name] = message.dependencies
            self.producers[result.name] = lane
            return "result", result.name, result
        return None
