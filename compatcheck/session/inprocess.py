"""Runs the stages in this process, for `check(model, inputs, isolate=False)`: a model object that
cannot be pickled to a worker. Nothing protects this process from a stage that crashes or hangs
(there is no --timeout here); the supervisor (supervisor.py) does that for everything else."""

from __future__ import annotations

from pathlib import Path
from typing import Callable

from compatcheck.errors import UsageError
from compatcheck.options import RunOptions
from compatcheck.report.model import ModelInfo, StageResult
from compatcheck.session.supervisor import Outcome


class InProcess:
    def __init__(self, spec, options: RunOptions, workdir: Path,
                 on_event: Callable[[str, str, StageResult | None], None] | None = None,
                 done: dict[str, StageResult] | None = None, artifacts: dict[str, str] | None = None):
        self.spec = spec
        self.options = options
        self.workdir = workdir
        self.on_event = on_event or (lambda kind, stage, result: None)
        self.outcome = Outcome(results=dict(done or {}), artifacts=dict(artifacts or {}))

    def run(self) -> Outcome:
        from compatcheck.worker.main import loaded_message, run_stages

        loaded = loaded_message(self.spec)
        self.outcome.model = ModelInfo.model_validate(loaded["model"])
        self.outcome.environment = loaded["environment"]
        request = {
            "options": self.options.model_dump(), "workdir": str(self.workdir),
            "stages": [name for name in self.options.stages if name not in self.outcome.results],
            "artifacts": dict(self.outcome.artifacts),
            "previous": {name: r.status.value for name, r in self.outcome.results.items()},
            "save_inputs": True,
        }
        run_stages(self.spec, request, self._receive)
        return self.outcome

    def _receive(self, message: dict) -> None:
        if message["type"] == "usage_error":
            raise UsageError(message["message"])
        if message["type"] == "start":
            self.on_event("start", message["stage"], None)
        elif message["type"] == "result":
            result = StageResult.model_validate(message["result"])
            self.outcome.artifacts.update(message["artifacts"])
            self.outcome.results[result.name] = result
            self.on_event("result", result.name, result)

    def stop(self) -> None:
        """Nothing runs beside this process."""
