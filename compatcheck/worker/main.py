"""The worker process: the only place the user's model is imported and stages run.

It speaks the protocol of compatcheck/protocol.py: started as `python -m compatcheck.worker
REQUEST.json FD`, it writes one message per line to FD.
"""

from __future__ import annotations

import os
import sys
import traceback
from pathlib import Path

from compatcheck.protocol import (Done, Finished, InternalErrorMessage, Judged, Loaded, Started, Step,
                                  UsageErrorMessage, WorkerRequest)


def load_spec(request: WorkerRequest):
    """The model the request names: a model file, or a payload file holding a model object."""
    if request.payload:
        from compatcheck.payload import unpack

        return unpack(Path(request.payload), request.sys_path)
    from compatcheck.spec import load

    return load(Path(request.model), request.factory, Path(request.rewritten) if request.rewritten else None)


def loaded_message(spec) -> Loaded:
    from compatcheck import host
    from compatcheck.report.model import ModelInfo
    from compatcheck.spec import describe_dynamic_shapes

    info = ModelInfo(
        path=str(spec.path), factory=spec.factory, input_sets=len(spec.input_sets),
        input_shapes=[[list(t.shape) for t in s.leaves()] for s in spec.input_sets],
        constants={name: repr(value) for name, value in spec.input_sets[0].constants()},
        dynamic_shapes=describe_dynamic_shapes(spec.dynamic_shapes),
        dynamic_shapes_inferred=spec.dynamic_shapes_inferred, tolerance=spec.tolerance,
    )
    return Loaded(model=info, environment=host.collect(), footprint=_footprint())


def _footprint() -> int | None:
    """This process's peak resident size in bytes (ru_maxrss: kilobytes on Linux, bytes on macOS)."""
    try:
        import resource
    except ImportError:
        return None
    peak = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss
    return peak if sys.platform == "darwin" else peak * 1024


def internal_error(exc: Exception, stage: str | None = None) -> InternalErrorMessage:
    """compatcheck's own code raised: its traceback goes into the worker's log and the message."""
    from compatcheck.errors import one_line

    text = "".join(traceback.format_exception(exc))
    sys.stderr.write(f"internal error of compatcheck{f' in {stage}' if stage else ''}:\n{text}")
    return InternalErrorMessage(stage=stage, message=one_line(exc), traceback=text[-20_000:])


def run_stages(spec, request: WorkerRequest, send, manifest=dict) -> None:
    """Run the request's stages on the loaded model; `send(message)` gets start, step, result and done,
    each result with `manifest()`: what the run has loaded so far."""
    from compatcheck.errors import UsageError
    from compatcheck.options import RunOptions
    from compatcheck.spec import cast
    from compatcheck.stages.base import StageContext
    from compatcheck.worker import reproduce

    from compatcheck.worker.inductor import share_cores

    workdir = Path(request.workdir)
    options = RunOptions.model_validate(request.options)
    share_cores(request.cores)
    spec.user.packages = frozenset(options.user_packages or ())
    try:
        cast(spec, options.dtype)
        spec.place(options.device)
        ctx = StageContext(spec, options, workdir, dict(request.artifacts), dict(request.previous), request.blockers,
                           request.sandbox)
        if request.save_inputs:
            reproduce.save_inputs(spec.input_sets, workdir / "inputs.npz")
    except UsageError as exc:
        send(UsageErrorMessage(message=str(exc)))
        return
    except Exception as exc:
        send(internal_error(exc))
        return
    for name in request.stages:
        try:
            if not _run_stage(name, ctx, send, manifest):
                return
        except Exception as exc:  # not the model's: what the model raises is caught as evidence
            send(internal_error(exc, name))
            ctx.previous[name] = "internal-error"
    send(Done())


def _run_stage(name: str, ctx, send, manifest) -> bool:
    """Run one stage and send its result; False when a usage error stops the run."""
    from compatcheck import stages
    from compatcheck.errors import UsageError
    from compatcheck.report.model import blocker
    from compatcheck.worker import reproduce
    from compatcheck.worker.harness import run_stage

    workdir = ctx.workdir
    stage = stages.load(name)  # one stage at a time: what it holds goes when the next one starts
    reproduce.write(stage, ctx, None)  # a crash or timeout before the verdict leaves it without one to reach
    send(Started(stage=stage.name))
    ctx.step = lambda what, name=stage.name, **phase: send(Step(stage=name, what=what, **phase))

    def judged(result, evidence, stage=stage, written=[]):
        if result.status.value not in written:  # the verdict only gains notes after the first time
            written.append(result.status.value)
            reproduce.write(stage, ctx, result.status.value)
        send(Judged(result=result, evidence=evidence))

    try:
        result = run_stage(stage, ctx, judged)
    except UsageError as exc:  # the model's own inputs or outputs are unusable, whatever the stage
        send(UsageErrorMessage(message=str(exc)))
        return False
    ctx.previous[stage.name] = result.status.value
    ctx.blockers[stage.name] = blocker(result.findings)
    if result.status.value == "skip":
        (workdir / f"reproduce_{stage.name}.py").unlink(missing_ok=True)
    send(Finished(result=result, artifacts=dict(ctx.artifacts), dependencies=manifest()))
    return True


def _start_inductor_probe(request: WorkerRequest) -> None:
    """Where a stage of this worker compiles with inductor, its one-time probe starts now, beside the
    stages before the first compile (worker/inductor.py)."""
    from compatcheck import stages
    from compatcheck.options import RunOptions
    from compatcheck.worker.inductor import share_cores, start_probe

    share_cores(request.cores)  # before the probe, which uses the cores left idle of this worker's share
    options = RunOptions.model_validate(request.options)
    if any(stages.load(name).inductor(options) for name in request.stages):
        start_probe(Path(request.workdir), options.device)


def main(argv: list[str]) -> int:
    request = WorkerRequest.model_validate_json(Path(argv[0]).read_text())
    stream = os.fdopen(int(argv[1]), "w")

    def send(message) -> None:
        from pydantic_core import PydanticSerializationError

        try:
            line = message.model_dump_json()
        except PydanticSerializationError:  # a lone surrogate in the model's message: no UTF-8 holds one
            from compatcheck.untrusted import encodable

            line = type(message).model_validate(encodable(message.model_dump())).model_dump_json()
        stream.write(line + "\n")
        stream.flush()

    from compatcheck.errors import UsageError
    from compatcheck.loaded_files import Recorder

    recorder = Recorder(request.workdir)  # before the model is imported: everything it loads counts
    recorder.install()
    try:
        spec = load_spec(request)
    except UsageError as exc:
        send(UsageErrorMessage(message=str(exc)))
        return 0
    except Exception as exc:  # the model's own code is called under spec._call, which makes a UsageError
        send(internal_error(exc))
        return 0
    send(loaded_message(spec))
    _start_inductor_probe(request)  # after the report's environment is read: inductor sets a variable
    run_stages(spec, request, send, recorder.manifest)
    return 0
