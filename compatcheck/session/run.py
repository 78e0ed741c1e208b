"""One `compatcheck run`: supervise the worker, assemble the report, write it atomically."""

from __future__ import annotations

import os
import shutil
import time
from datetime import datetime, timezone
from pathlib import Path
from typing import Callable

from compatcheck import __version__, redact
from compatcheck.report import routes
from compatcheck import ladder
from compatcheck.session.cache import StageCache, run_key
from compatcheck.loaded_files import unchanged
from compatcheck.options import RunOptions
from compatcheck.report.model import CacheOrigin, Report, StageResult, Status
from compatcheck.worker.speed import add_speedups
from compatcheck.session.supervisor import Supervisor
from compatcheck.session.workfolder import Published, WorkFolder


def resumable(previous: Report | None, options: RunOptions, key: str) -> tuple[dict[str, StageResult], str | None]:
    """The verdicts of an earlier, interrupted report that still hold, or why none does.

    They hold only for the same run: the same options, the same run key (model path, factory,
    compatcheck version, interpreter, installed packages, environment) and every file the run
    loaded unchanged. A stage whose artifact is gone is run again.
    """
    if previous is None or all(stage.reason == INTERRUPTED for stage in previous.stages):
        return {}, None
    if previous.options != options.model_dump():
        return {}, "the report was written with other options"
    if previous.run_key is None or not previous.dependencies:
        return {}, "the report records no dependency manifest (written by an older compatcheck)"
    if previous.run_key != key:
        return {}, ("the report is of another model, factory, compatcheck version, interpreter, set of installed "
                    "packages or environment")
    changed = unchanged(previous.dependencies)
    if changed:
        return {}, f"{changed} changed since the report was written"
    done = {}
    for stage in previous.stages:
        if stage.reason == INTERRUPTED or stage.name not in options.stages:
            continue
        if stage.artifacts and not all(Path(p).exists() for p in stage.artifacts.values()):
            continue
        done[stage.name] = stage
    return done, None


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
                reason = ladder.missing_artifact(needed, known.status.value, ladder.blocker(known.findings))
                skips[name] = StageResult(name=name, status=Status.SKIP, reason=reason)
                break
    return skips


def execute(model: Path, factory: str, options: RunOptions, *, artifacts_dir: Path | None = None,
            command: list[str] | None = None, on_event=None, jobs: int = 1,
            previous: Report | None = None, cache: StageCache | None = None,
            say: Callable[[str], None] = lambda line: None, protected: set[str] = frozenset(),
            payload: bytes | None = None, spec=None) -> Report:
    """Run the stages not resumed or cached; `protected` are input files --artifacts must never overwrite.

    The model is the file `model` (and `factory`), or a model object: `payload` (payload.py) to load
    it in the workers, or its `spec` to run it in this process; `model` and `factory` then name the
    file and the class that define it."""
    published = Published(artifacts_dir) if artifacts_dir else None  # refuses a folder another run uses
    work = WorkFolder()
    try:
        return _execute(model, factory, options, work.path, published, command, on_event, jobs, previous, cache,
                        say, protected, payload, spec)
    finally:
        work.close()
        if published:
            published.close()
            for path in sorted(published.refused):
                say(f"not written into --artifacts: {path} is a file the run loaded")


def _execute(model, factory, options, workdir, published, command, on_event, jobs, previous, cache, say,
             protected, payload, spec) -> Report:
    started = time.monotonic()
    report = Report(
        tool_version=__version__, created=datetime.now(timezone.utc).isoformat(timespec="seconds"),
        command=redact.tree(command or []), options=redact.tree(options.model_dump()),
        run_key=cache.key if cache else run_key(model, factory, options, payload)[0],
    )
    done, why = resumable(previous, options, report.run_key)
    if why:
        say(f"--resume: nothing resumed, every stage runs again: {why}")
    dependencies = dict(previous.dependencies) if done else {}
    artifacts = {name: path for stage in done.values() for name, path in stage.artifacts.items()}
    known_model, known_environment = (previous.model, previous.environment) if done else (None, {})
    lane_of = {name: lane for lane, names in enumerate(ladder.lanes(options.stages, jobs)) for name in names}
    logs: dict[int, dict[str, Path]] = {}
    for name in options.stages if cache else ():
        hit = None if name in done else cache.load(name, workdir)
        if hit:
            done[name] = hit.result
            artifacts.update(hit.result.artifacts)
            known_model, known_environment = hit.model, hit.environment
            dependencies.update(hit.dependencies["files"])
            logs.setdefault(lane_of[name], {}).setdefault(hit.run, hit.log)
            if hit.inputs and not (workdir / "inputs.npz").exists():
                shutil.copyfile(hit.inputs, workdir / "inputs.npz")
    for lane, by_run in logs.items():  # the logs of the workers that computed the cached stages
        with open(workdir / f"worker-{lane}.log", "wb") as log:
            for path in by_run.values():
                if path.is_file():
                    log.write(path.read_bytes())
    done.update(settled_skips(done, options))

    def inputs() -> set[str]:
        """Files the run must never overwrite: the given ones and every file it has loaded so far."""
        loaded = {path for manifest in list(supervisor.outcome.dependencies.values()) for path in manifest["files"]}
        return set(protected) | set(dependencies) | loaded

    def event(kind, stage, result):
        if kind == "result" and published:
            published.sync(workdir, inputs())  # a killed run keeps every stage it finished
        if on_event:
            on_event(kind, stage, result)

    if published:
        published.sync(workdir, set(protected) | set(dependencies))
    if spec is not None:
        from compatcheck.session.inprocess import InProcess

        supervisor = InProcess(spec, options, workdir, event, done=done, artifacts=artifacts)
    else:
        payload_path = None
        if payload is not None:
            from compatcheck.payload import FILE_NAME

            payload_path = workdir / FILE_NAME
            payload_path.write_bytes(payload)
        supervisor = Supervisor(model, factory, options, workdir, event, jobs=jobs, done=done, artifacts=artifacts,
                                payload=payload_path)
    try:
        supervisor.run()
    except KeyboardInterrupt:
        report.interrupted = True
    finally:
        supervisor.stop()
        outcome = supervisor.outcome
        computed = CacheOrigin(computed_at=report.created, tool_version=__version__)
        for name, manifest in outcome.dependencies.items():
            dependencies.update(manifest["files"])
            lane = outcome.producers[name]
            if cache and outcome.model:
                cache.store(outcome.results[name], outcome.model, outcome.environment, manifest,
                            f"{report.created}:{os.getpid()}:{lane}", computed, workdir,
                            workdir / f"worker-{lane}.log")
        if published:
            published.sync(workdir, set(protected) | set(dependencies))
    report.model = outcome.model or known_model
    report.environment = outcome.environment or known_environment
    report.workers = outcome.workers
    report.dependencies = dict(sorted(dependencies.items()))
    for name in options.stages:
        result = outcome.results.get(name)
        report.stages.append(result or StageResult(name=name, status=Status.SKIP, reason=INTERRUPTED))
        stage = report.stages[-1]
        # The working folder is removed: artifacts live on only where --artifacts put them.
        stage.artifacts = {key: published.path_of(workdir, path) for key, path in stage.artifacts.items()
                           } if published else {}
    report.findings = [finding for stage in report.stages for finding in stage.findings]
    report.routes = routes.summarize(report)
    routes.annotate(report)
    add_speedups(report.stages)
    report.seconds = round(time.monotonic() - started, 3)
    return report
