"""Runs the stages in this process, for `check(model, inputs, isolate=False)`: a model object that
cannot be pickled to a worker. Nothing protects this process from a stage that crashes or hangs
(there is no --timeout here); the supervisor (supervisor.py) does that for everything else. The
request and the messages are the workers' own (protocol.py), taken in by the same Outcome."""

from __future__ import annotations

from pathlib import Path
from typing import Callable

from compatcheck import untrusted
from compatcheck.report.model import StageResult
from compatcheck.session.outcome import Outcome


class InProcess:
    def __init__(self, spec, options, workdir: Path,
                 on_event: Callable[[str, str, StageResult | None], None] | None = None,
                 done: dict[str, StageResult] | None = None, artifacts: dict[str, str] | None = None):
        self.spec = spec
        self.options = options
        self.workdir = workdir
        self.on_event = on_event or (lambda kind, stage, result: None)
        self.outcome = Outcome(results=dict(done or {}), artifacts=dict(artifacts or {}),
                               key_reach="readable by the model under test: it runs in this process (isolate=False)")

    def run(self) -> Outcome:
        from compatcheck.worker.main import loaded_message, run_stages

        self._receive(loaded_message(self.spec))
        todo = [name for name in self.options.stages if name not in self.outcome.results]
        request = self.outcome.request(todo, self.options, self.workdir, save_inputs=True,
                                       model=str(self.spec.path), factory=self.spec.factory)
        run_stages(self.spec, request, self._receive)
        return self.outcome

    def _receive(self, message) -> None:
        message = type(message).model_validate(untrusted.encodable(message.model_dump()))  # as a worker's would be
        event = self.outcome.receive(message, 0)
        if event is not None:
            self.on_event(*event)

    def stop(self) -> None:
        """Nothing runs beside this process."""
