"""Run one stage in the worker: build, run every input set, compare with eager, collect findings.

Everything here is the same for every stage; stages only build runners and read their evidence.
"""

from __future__ import annotations

import os
import time
import traceback
import warnings
from contextlib import contextmanager

import torch

from compatcheck import torch_features
from compatcheck.compare import compare_outputs
from compatcheck.errors import UsageError, one_line
from compatcheck.report.model import Finding, InputSetResult, StageResult, Status
from compatcheck.ladder import BY_NAME, REFERENCE, missing_artifact
from compatcheck.stages.base import Stage, StageContext

MAX_ERROR_TEXT = 20_000
# What the model's code may raise: sys.exit() and KeyboardInterrupt too (the worker has its own
# session, so no Ctrl-C reaches it), which would otherwise end the worker and read as a crash.
MODEL_ERRORS = (Exception, SystemExit, KeyboardInterrupt)


@contextmanager
def isolated_globals():
    """Undo what a stage or the model changes in process-wide state, so later stages do not inherit it."""
    saved = (torch.get_default_dtype(), torch.is_grad_enabled(), torch.get_num_threads(), os.getcwd())
    try:
        yield
    finally:
        dtype, grad, threads, cwd = saved
        torch.set_default_dtype(dtype)
        torch.set_grad_enabled(grad)
        if torch.get_num_threads() != threads:
            torch.set_num_threads(threads)
        os.chdir(cwd)


@contextmanager
def recording_warnings(into: list):
    """Record every warning with the Python stack at the moment it was raised."""
    with warnings.catch_warnings():
        warnings.simplefilter("always")

        def record(message, category, filename, lineno, file=None, line=None):
            into.append((warnings.WarningMessage(message, category, filename, lineno), traceback.extract_stack()))

        warnings.showwarning = record
        yield


def skip_reason(stage: Stage, ctx: StageContext) -> str | None:
    if stage.name != REFERENCE:
        # eager may run in another lane's worker; its verdict, if known, decides, else its outputs do.
        eager = ctx.previous.get(REFERENCE)
        if eager is not None and eager != Status.PASS.value:
            return f"eager did not pass ({eager}): nothing to compare with"
        try:
            ctx.reference
        except UsageError:
            raise
        except MODEL_ERRORS as exc:
            return f"eager raised {one_line(exc)}: nothing to compare with"
    for needed in BY_NAME[stage.name].requires:
        if needed not in ctx.artifacts:
            return missing_artifact(needed, ctx.previous.get(needed), ctx.blockers.get(needed))
    for feature in stage.needs(ctx):
        reason = torch_features.missing(feature)
        if reason:
            return reason
    return stage.available(ctx)


def _summarize(sets: list[InputSetResult]) -> str | None:
    for one in sets:
        if one.error:
            return f"input set {one.index + 1}: {one.error}"
        if not one.ok and not one.leaves:
            return f"input set {one.index + 1}: {one.structure}"
        bad = [leaf for leaf in one.leaves if not leaf.ok]
        if bad:
            return f"input set {one.index + 1}, output {bad[0].output}: {bad[0].problem}"
    return None


def run_stage(stage: Stage, ctx: StageContext) -> StageResult:
    result = StageResult(name=stage.name, status=Status.SKIP)
    reason = skip_reason(stage, ctx)
    if reason:
        result.reason = reason
        return result

    ctx.warnings = []
    ctx.input_results = result.input_sets
    error = None
    raised: list[BaseException] = []  # what the runner raised, per input set that failed
    started = time.perf_counter()
    with isolated_globals(), recording_warnings(ctx.warnings):
        try:
            runner = stage.build(ctx)
            if runner is not None:
                for index, input_set in enumerate(ctx.spec.input_sets):
                    result.input_sets.append(run_input_set(ctx, runner, index, input_set, stage.flat_outputs, raised))
                if ctx.options.bench and all(s.ok for s in result.input_sets):
                    result.timings = _time(stage, ctx, runner)
        except UsageError:
            raise  # the model file's fault, not the stage's: the run stops with it
        except MODEL_ERRORS as exc:
            error = exc
            result.status = Status.FAIL
            result.reason = one_line(exc)
            result.error = "".join(traceback.format_exception(exc))[-MAX_ERROR_TEXT:]
        finally:
            result.seconds = round(time.perf_counter() - started, 3)
            ctx.stage_seconds = result.seconds
            result.backend = stage.backend(ctx)
            try:
                result.findings = stage.diagnose(ctx, error)
            except Exception as exc:
                result.findings = []
                result.reason = (result.reason or "") + f" (diagnosis failed: {one_line(exc)})"
            stage.close()

    result.artifacts = {k: v for k, v in ctx.artifacts.items() if k == stage.name}
    if error is None:
        errors = [(s, s.error) for s in result.input_sets if s.error]
        leaves = [leaf for s in result.input_sets for leaf in s.leaves]
        abs_errors = [leaf.max_abs_error for leaf in leaves if leaf.max_abs_error is not None]
        rel_errors = [leaf.max_rel_error for leaf in leaves if leaf.max_rel_error is not None]
        result.max_abs_error = max(abs_errors) if abs_errors else None
        result.max_rel_error = max(rel_errors) if rel_errors else None
        result.status = status_of(result.input_sets)
        if errors:
            result.error = errors[0][1]
        result.reason = _summarize(result.input_sets)
        if runner is None and result.status is Status.PASS:
            result.reason = "built and checked; nothing here to run it with, the next stage runs it"
        elif result.status is Status.PASS and any(leaf.fp64_verdict == "within-noise" for leaf in leaves):
            result.reason = "differences from eager are within fp64-adjudicated noise"
    if result.status is Status.FAIL:
        _blame_environment(result, error or (raised[0] if raised else None))
    _release(error, *raised)
    return result


def _release(*errors: BaseException | None) -> None:
    """Drop the locals the stage's exceptions hold through their tracebacks (a model that failed after
    allocating gigabytes), so the stages after it get that memory back."""
    for error in errors:
        seen = set()
        while error is not None and id(error) not in seen:
            seen.add(id(error))
            traceback.clear_frames(error.__traceback__)
            error = error.__cause__ or error.__context__


def _blame_environment(result: StageResult, error: BaseException | None) -> None:
    """A failure from a library's failed import becomes broken-env, with the fix instead of findings."""
    from compatcheck.diagnose.broken_env import fault

    found = fault(error)
    if found is None:
        return
    what, fix = found
    result.status = Status.BROKEN_ENV
    result.reason = f"broken environment: {what}; fix: {fix}"
    result.findings = [Finding(stage=result.name, kind="broken-environment", message=f"{what}; fix: {fix}")]


def _time(stage: Stage, ctx: StageContext, runner) -> list:
    from compatcheck.worker.speed import measure

    return [measure(label, timed, input_set, index, ctx.options.bench_seconds)
            for label, timed in stage.timed_runners(runner).items()
            for index, input_set in enumerate(ctx.spec.input_sets)]


def status_of(sets: list[InputSetResult]) -> Status:
    """The verdict of a stage whose artifact ran on `sets`."""
    if any(s.error for s in sets):
        return Status.FAIL
    return Status.PASS if all(s.ok for s in sets) else Status.MISMATCH


def run_input_set(ctx, runner, index, input_set, flat: bool, raised: list | None = None) -> InputSetResult:
    """Run the artifact on one input set and compare its outputs with eager's; what it raises goes
    into `raised`."""
    started = time.perf_counter()
    try:
        outputs = runner(input_set)
    except MODEL_ERRORS as exc:
        if raised is not None:
            raised.append(exc)
        return InputSetResult(index=index, ok=False, error=one_line(exc, 400),
                              seconds=round(time.perf_counter() - started, 4))
    seconds = round(time.perf_counter() - started, 4)
    noise = ctx.noise[index] if ctx.noise is not None else None
    leaves, structure = compare_outputs(
        ctx.reference[index], outputs, ctx.tolerances, flat=flat, noise=noise,
        fp64=lambda: ctx.fp64(index),
    )
    ok = all(leaf.ok for leaf in leaves) and bool(leaves or not structure)
    return InputSetResult(index=index, ok=ok, structure=structure, seconds=seconds, leaves=leaves)
