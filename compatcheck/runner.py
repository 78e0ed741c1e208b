"""One `compatcheck run`: supervise the worker, assemble the report, write it atomically."""

from __future__ import annotations

import os
import shutil
import tempfile
import time
from datetime import datetime, timezone
from pathlib import Path

from compatcheck import __version__
from compatcheck import stages as ladder
from compatcheck.cache import StageCache
from compatcheck.options import RunOptions
from compatcheck.report.model import Report, StageResult, Status
from compatcheck.speed import add_speedups
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


def resumable(previous: Report | None, options: RunOptions) -> tuple[dict[str, StageResult], dict[str, str]]:
    """The verdicts of an earlier, interrupted report that still hold, and the artifacts still on disk.

    A stage is reused only if it reached a verdict under the same options; a stage whose artifact
    is gone is run again.
    """
    if previous is None or previous.options != options.model_dump():
        return {}, {}
    done, artifacts = {}, {}
    for stage in previous.stages:
        if stage.reason == INTERRUPTED or stage.name not in options.stages:
            continue
        if stage.artifacts and not all(Path(p).exists() for p in stage.artifacts.values()):
            continue
        done[stage.name] = stage
        artifacts.update(stage.artifacts)
    return done, artifacts


INTERRUPTED = "interrupted before it ran"


def settled_skips(done: dict[str, StageResult], options: RunOptions) -> dict[str, StageResult]:
    """Skips already decided by known verdicts: a stage whose required stage is done without an
    artifact. Deciding them here spares a worker when everything else came from the cache."""
    skips: dict[str, StageResult] = {}
    for name in options.stages:
        if name in done:
            continue
        for needed in ladder.BY_NAME[name].requires:
            known = done.get(needed) or skips.get(needed)
            if known is not None and needed not in known.artifacts:
                reason = ladder.missing_artifact(needed, known.status.value)
                skips[name] = StageResult(name=name, status=Status.SKIP, reason=reason)
                break
    return skips


def execute(model: Path, factory: str, options: RunOptions, *, artifacts_dir: Path | None = None,
            command: list[str] | None = None, on_event=None, jobs: int = 1,
            previous: Report | None = None, cache: StageCache | None = None) -> Report:
    started = time.monotonic()
    report = Report(
        tool_version=__version__, created=datetime.now(timezone.utc).isoformat(timespec="seconds"),
        command=command or [], options=options.model_dump(),
    )
    workdir = Path(artifacts_dir) if artifacts_dir else Path(tempfile.mkdtemp(prefix="compatcheck-"))
    workdir.mkdir(parents=True, exist_ok=True)
    done, artifacts = resumable(previous, options)
    known_model, known_environment = (previous.model, previous.environment) if previous else (None, {})
    for name in options.stages if cache else ():
        hit = None if name in done else cache.load(name, workdir)
        if hit:
            result, known_model, known_environment = hit
            result.cached = True
            done[name] = result
            artifacts.update(result.artifacts)
    done.update(settled_skips(done, options))
    supervisor = Supervisor(model, factory, options, workdir.resolve(), artifacts_dir is not None, on_event,
                            jobs=jobs, done=done, artifacts=artifacts)
    try:
        supervisor.run()
    except KeyboardInterrupt:
        report.interrupted = True
    finally:
        supervisor.stop()
        outcome = supervisor.outcome
        if cache and outcome.model:
            for result in outcome.results.values():
                if not result.cached:
                    cache.store(result, outcome.model, outcome.environment)
        if artifacts_dir is None:
            shutil.rmtree(workdir, ignore_errors=True)
    report.model = outcome.model or known_model
    report.environment = outcome.environment or known_environment
    report.workers = outcome.workers
    for name in options.stages:
        result = outcome.results.get(name)
        report.stages.append(result or StageResult(name=name, status=Status.SKIP, reason=INTERRUPTED))
        if artifacts_dir is None:
            report.stages[-1].artifacts = {}  # they were in a temporary folder, now removed
    report.findings = [finding for stage in report.stages for finding in stage.findings]
    add_speedups(report.stages)
    report.seconds = round(time.monotonic() - started, 3)
    return report
