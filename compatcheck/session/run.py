"""One run, in three steps: reuse (resumed and cached verdicts), supervise (the workers for the rest),
assemble (the report). The CLI, check() and triton-repo all run through `execute`."""

from __future__ import annotations

import os
import time
from datetime import datetime, timezone
from pathlib import Path
from dataclasses import dataclass, field
from typing import Callable

from compatcheck import __version__, ladder, redact, untrusted
from compatcheck.errors import UsageError
from compatcheck.loaded_files import unchanged
from compatcheck.report import routes, verdict
from compatcheck.report.model import CacheOrigin, Report, StageResult, blocker
from compatcheck.report.verdict import Evidence
from compatcheck.session.cache import StageCache, Unusable, run_key
from compatcheck.session.cache import default_dir as default_cache_dir
from compatcheck.session import workers
from compatcheck.session.supervisor import Supervisor
from compatcheck.session.workfolder import Published, WorkFolder
from compatcheck.worker.speed import add_speedups


def resumable(previous: Report | None, options, key: str) -> tuple[dict[str, StageResult], str | None]:
    """The verdicts of an earlier, interrupted report that still hold, or why none does.

    They hold only for the same run: the same options, the same run key (model path, factory,
    compatcheck version, interpreter, installed packages, environment) and every file the run
    loaded unchanged. A stage whose artifact is gone is run again, and so is one whose artifact a stage
    still to run needs: nothing proves the file in --artifacts is what this run wrote, and the loaders
    of those files can run code (torch.export.load unpickles).
    """
    if previous is None or all(stage.reason == INTERRUPTED for stage in previous.stages):
        return {}, None
    if previous.options != options.model_dump(mode="json"):
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
    while needed := {name for todo in options.stages if todo not in done for name in ladder.BY_NAME[todo].requires
                     if name in done and done[name].artifacts}:
        for name in needed:
            del done[name]
    return done, None


INTERRUPTED = "interrupted before it ran"


def settled_skips(done: dict[str, StageResult], options) -> dict[str, StageResult]:
    """Skips already decided by known verdicts: a stage whose required stage is done without an
    artifact. Deciding them here spares a worker when everything else came from the cache."""
    skips: dict[str, StageResult] = {}
    for name in options.stages:
        if name in done:
            continue
        for needed in ladder.BY_NAME[name].requires:
            known = done.get(needed) or skips.get(needed)
            if known is not None and needed not in known.artifacts:
                reason = ladder.missing_artifact(needed, known.status.value, blocker(known.findings))
                skips[name] = verdict.result(name, Evidence(skipped=reason))
                break
    return skips


@dataclass
class RunRequest:
    """One run: which model, with which options, and where its results go.

    The model is the file `model` (and `factory`), or a model object: `payload` (payload.py) to load it
    in the workers, or its `spec` to run it in this process; `model` and `factory` then name the file
    and the class that define it."""

    model: Path
    factory: str
    chosen: object  # options.parse(): the run options, and where the artifacts go, how many workers, the cache
    command: list[str] = field(default_factory=list)
    previous: Report | None = None  # the report to --resume from
    protected: set[str] = field(default_factory=set)  # input files --artifacts must never overwrite
    payload: bytes | None = None
    rewritten: Path | None = None  # with `compatcheck fix`: a rewritten copy of `model`, run in its place
    spec: object = None
    on_event: Callable = lambda kind, stage, result: None
    say: Callable[[str], None] = lambda line: None
    options: object = None  # RunOptions, made from `chosen` when the run starts


def execute(request: RunRequest) -> Report:
    """Run the stages not resumed or cached, and assemble the report."""
    options = request.options = request.chosen.run_options()
    if options.device == "cuda":
        from compatcheck.host import cuda_missing

        missing = cuda_missing()
        if missing:  # one line and exit 2, not every stage failing on its first tensor
            raise UsageError(f"device cuda needs a GPU: {missing}; run on a machine with one, or with device cpu")
    if options.rewrites:
        from compatcheck.diagnose.catalog import load

        load(str(options.rewrites))  # a bad catalog is a usage error now, not a failed diagnosis later
    cache = None
    # --bench times this machine now: never served from the cache; nor is a rewritten copy, which the cache's
    # key would take for the model file
    if request.chosen.cache and not options.bench and request.rewritten is None:
        try:
            cache = StageCache(default_cache_dir(), request.model, request.factory, options, payload=request.payload,
                               say=request.say)
        except Unusable as exc:
            request.say(f"the result cache is not used: {exc}")
    artifacts = request.chosen.artifacts if request.rewritten is None else None  # the model file's run's alone
    published = Published(artifacts) if artifacts else None  # refuses a folder another run uses
    work = WorkFolder()
    started = time.monotonic()
    report = Report(
        tool_version=__version__, created=datetime.now(timezone.utc).isoformat(timespec="seconds"),
        command=untrusted.encodable(redact.tree(list(request.command))),
        options=redact.tree(options.model_dump(mode="json")),
        run_key=cache.key if cache else run_key(request.model, request.factory, options, request.payload)[0],
    )
    try:
        known = _reuse(request, report, cache, work.path)
        outcome = _supervise(request, report, cache, work.path, published, known)
        _assemble(report, request, known, outcome, work.path, published)
    finally:
        work.close()
        if published:
            published.close()
            for path in sorted(published.refused):
                request.say(f"not written into --artifacts: {path} is a file the run loaded")
            for why in sorted(set(published.unwritten.values())):
                names = sorted(path for path, said in published.unwritten.items() if said == why)
                request.say(f"not written into --artifacts ({why}): {', '.join(names)}")
    report.seconds = round(time.monotonic() - started, 3)
    return report


@dataclass
class _Known:
    """What the run knows before any worker starts: resumed and cached verdicts."""

    done: dict[str, StageResult]
    artifacts: dict[str, str]
    dependencies: dict[str, str | None]
    model: object = None
    environment: dict = field(default_factory=dict)


def _reuse(request: RunRequest, report: Report, cache: StageCache | None, workdir: Path) -> _Known:
    """The verdicts of the resumed report that still hold, then those the cache serves, with their files
    and the logs of the workers that computed them; and the skips they settle."""
    options = request.options
    done, why = resumable(request.previous, options, report.run_key)
    if why:
        request.say(f"--resume: nothing resumed, every stage runs again: {why}")
    previous = request.previous
    known = _Known(done, {name: path for stage in done.values() for name, path in stage.artifacts.items()},
                   dict(previous.dependencies) if done else {},
                   previous.model if done else None, previous.environment if done else {})
    lanes = ladder.lanes(options.stages, workers.wanted(request.chosen.jobs))
    lane_of = {name: lane for lane, names in enumerate(lanes) for name in names}
    logs: dict[int, dict[str, Path]] = {}
    for name in options.stages if cache else ():
        hit = None if name in done else cache.load(name, workdir)
        if hit:
            done[name] = hit.result
            known.artifacts.update(hit.result.artifacts)
            known.model, known.environment = hit.model, hit.environment
            known.dependencies.update(hit.dependencies["files"])
            logs.setdefault(lane_of[name], {}).setdefault(hit.run, hit.log)
    for lane, by_run in logs.items():  # the logs of the workers that computed the cached stages
        with open(workdir / f"worker-{lane}.log", "wb") as log:
            for text in by_run.values():
                log.write(text)
    done.update(settled_skips(done, options))
    return known


def _supervise(request: RunRequest, report: Report, cache: StageCache | None, workdir: Path,
               published: Published | None, known: _Known):
    """Run the remaining stages in workers (or in this process), publishing each finished stage into
    --artifacts and storing it in the cache; an interrupt keeps what finished."""
    options = request.options

    def inputs() -> set[str]:
        """Files the run must never overwrite: the given ones and every file it has loaded so far."""
        loaded = {path for manifest in list(runner.outcome.dependencies.values()) for path in manifest["files"]}
        return set(request.protected) | set(known.dependencies) | loaded

    def event(kind, stage, result):
        if kind == "result" and published:
            published.sync(workdir, inputs())  # a killed run keeps every stage it finished
        request.on_event(kind, stage, result)

    if published:
        published.sync(workdir, set(request.protected) | set(known.dependencies))
    if request.spec is not None:
        from compatcheck.session.inprocess import InProcess

        runner = InProcess(request.spec, options, workdir, event, done=known.done, artifacts=known.artifacts)
    else:
        payload_path = None
        if request.payload is not None:
            from compatcheck.payload import FILE_NAME

            payload_path = workdir / FILE_NAME
            payload_path.write_bytes(request.payload)
        runner = Supervisor(request.model, request.factory, options, workdir, event,
                            jobs=workers.wanted(request.chosen.jobs), done=known.done, artifacts=known.artifacts, payload=payload_path,
                            rewritten=request.rewritten)
    try:
        runner.run()
    except KeyboardInterrupt:
        report.interrupted = True
    finally:
        runner.stop()
        outcome = runner.outcome
        computed = CacheOrigin(computed_at=report.created, tool_version=__version__)
        for name, manifest in outcome.dependencies.items():
            known.dependencies.update(manifest["files"])
            lane = outcome.producers[name]
            if cache and outcome.model:
                cache.store(outcome.results[name], outcome.model, outcome.environment, manifest,
                            f"{report.created}:{os.getpid()}:{lane}", computed, workdir,
                            workdir / f"worker-{lane}.log")
        if published:
            published.sync(workdir, set(request.protected) | set(known.dependencies))
    return outcome


def _assemble(report: Report, request: RunRequest, known: _Known, outcome, workdir: Path,
              published: Published | None) -> None:
    """The report from every stage's result, in ladder order, with the routes they open."""
    report.model = outcome.model or known.model
    report.environment = dict(outcome.environment or known.environment)
    if outcome.key_reach:  # whether the model, where this run starts it, could reach the cache key
        report.environment["cache key"] = outcome.key_reach
    report.workers = outcome.workers
    report.dependencies = dict(sorted(known.dependencies.items()))
    for name in request.options.stages:
        result = outcome.results.get(name)
        report.stages.append(result or verdict.result(name, Evidence(skipped=INTERRUPTED)))
        stage = report.stages[-1]
        # The working folder is removed: artifacts live on only where --artifacts put them.
        stage.artifacts = {key: published.path_of(workdir, path) for key, path in stage.artifacts.items()
                           } if published else {}
    report.findings = [finding for stage in report.stages for finding in stage.findings]
    report.routes = routes.summarize(report)
    routes.annotate(report)
    add_speedups(report.stages)
