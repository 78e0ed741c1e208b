"""One `compatcheck run`: supervise the worker, assemble the report, write it atomically."""

from __future__ import annotations

import os
import shutil
import tempfile
import time
from datetime import datetime, timezone
from pathlib import Path

from compatcheck import __version__
from compatcheck.options import RunOptions
from compatcheck.report.model import Report, StageResult, Status
from compatcheck.supervisor import Supervisor


def write_atomically(path: Path, text: str) -> None:
    """Write via a temporary file in the same folder and rename, so no reader sees half a file."""
    path = Path(path)
    fd, tmp = tempfile.mkstemp(prefix=f".{path.name}.", dir=path.parent or ".")
    try:
        with os.fdopen(fd, "w") as f:
            f.write(text)
        os.replace(tmp, path)
    except BaseException:
        Path(tmp).unlink(missing_ok=True)
        raise


def execute(model: Path, factory: str, options: RunOptions, *, artifacts_dir: Path | None = None,
            command: list[str] | None = None, on_event=None) -> Report:
    started = time.monotonic()
    report = Report(
        tool_version=__version__, created=datetime.now(timezone.utc).isoformat(timespec="seconds"),
        command=command or [], options=options.model_dump(),
    )
    workdir = Path(artifacts_dir) if artifacts_dir else Path(tempfile.mkdtemp(prefix="compatcheck-"))
    workdir.mkdir(parents=True, exist_ok=True)
    supervisor = Supervisor(model, factory, options, workdir.resolve(), artifacts_dir is not None, on_event)
    try:
        supervisor.run()
    except KeyboardInterrupt:
        report.interrupted = True
    finally:
        supervisor.stop()
        if artifacts_dir is None:
            shutil.rmtree(workdir, ignore_errors=True)
    outcome = supervisor.outcome
    report.model = outcome.model
    report.environment = outcome.environment
    report.workers = outcome.workers
    for name in options.stages:
        result = outcome.results.get(name)
        report.stages.append(result or StageResult(name=name, status=Status.SKIP, reason="interrupted before it ran"))
        if artifacts_dir is None:
            report.stages[-1].artifacts = {}  # they were in a temporary folder, now removed
    report.findings = [finding for stage in report.stages for finding in stage.findings]
    report.seconds = round(time.monotonic() - started, 3)
    return report
