"""The worker process: the only place the user's model is imported and stages run.

Protocol: `python -m compatcheck.worker REQUEST.json FD`. The request names the model (a file, or
a payload file holding a model object), the options, the stages left to run and the artifacts
earlier workers made. The worker writes one
JSON message per line to file descriptor FD (never stdout, which belongs to the model):
  {"type": "usage_error", "message": ...}            the model file is unusable
  {"type": "loaded", "model": ..., "environment": ...}
  {"type": "start", "stage": name}
  {"type": "result", "result": StageResult, "artifacts": {...}, "dependencies": manifest}
  {"type": "done"}
A worker that dies mid-stage simply stops writing; the supervisor records the crash and starts
another for the remaining stages.
"""

from __future__ import annotations

import json
import os
from pathlib import Path


def _send(stream, **message) -> None:
    stream.write(json.dumps(message) + "\n")
    stream.flush()


def load_spec(request: dict):
    """The model the request names: a model file, or a payload file holding a model object."""
    if request.get("payload"):
        from compatcheck.payload import unpack

        return unpack(Path(request["payload"]), request["sys_path"])
    from compatcheck.spec import load

    return load(Path(request["model"]), request["factory"])


def loaded_message(spec) -> dict:
    from compatcheck import host
    from compatcheck.report.model import ModelInfo
    from compatcheck.spec import describe_dynamic_shapes

    info = ModelInfo(
        path=str(spec.path), factory=spec.factory, input_sets=len(spec.input_sets),
        input_shapes=[[list(t.shape) for t in s.leaves()] for s in spec.input_sets],
        dynamic_shapes=describe_dynamic_shapes(spec.dynamic_shapes),
        dynamic_shapes_inferred=spec.dynamic_shapes_inferred, tolerance=spec.tolerance,
    )
    return {"type": "loaded", "model": info.model_dump(), "environment": host.collect()}


def run_stages(spec, request: dict, send, manifest=dict) -> None:
    """Run the request's stages on the loaded model; `send(message)` gets start, result and done,
    each result with `manifest()`: what the run has loaded so far."""
    from compatcheck import ladder, stages
    from compatcheck.worker import reproduce
    from compatcheck.errors import UsageError
    from compatcheck.worker.harness import run_stage
    from compatcheck.options import RunOptions
    from compatcheck.stages.base import StageContext

    workdir = Path(request["workdir"])
    options = RunOptions.model_validate(request["options"])
    ctx = StageContext(spec, options, workdir, dict(request["artifacts"]), dict(request["previous"]),
                       request.get("blockers"))
    todo = [stages.load(name) for name in request["stages"]]
    if request["save_inputs"]:
        reproduce.save_inputs(spec.input_sets, workdir / "inputs.npz")
    for stage in todo:
        reproduce.write(stage, ctx, None)  # a crash or timeout leaves it without a verdict to reach
        send({"type": "start", "stage": stage.name})
        try:
            result = run_stage(stage, ctx)
        except UsageError as exc:  # the model's own inputs or outputs are unusable, whatever the stage
            send({"type": "usage_error", "message": str(exc)})
            return
        ctx.previous[stage.name] = result.status.value
        ctx.blockers[stage.name] = ladder.blocker(result.findings)
        if result.status.value == "skip":
            (workdir / f"reproduce_{stage.name}.py").unlink(missing_ok=True)
        else:
            reproduce.write(stage, ctx, result.status.value)
        send({"type": "result", "result": result.model_dump(mode="json"), "artifacts": dict(ctx.artifacts),
              "dependencies": manifest()})
    send({"type": "done"})


def main(argv: list[str]) -> int:
    request = json.loads(Path(argv[0]).read_text())
    stream = os.fdopen(int(argv[1]), "w")

    from compatcheck.loaded_files import Recorder
    from compatcheck.errors import UsageError

    recorder = Recorder(request["workdir"])  # before the model is imported: everything it loads counts
    recorder.install()
    try:
        spec = load_spec(request)
    except UsageError as exc:
        _send(stream, type="usage_error", message=str(exc))
        return 0
    _send(stream, **loaded_message(spec))
    run_stages(spec, request, lambda message: _send(stream, **message), recorder.manifest)
    return 0

