"""The worker process: the only place the user's model is imported and stages run.

Protocol: `python -m compatcheck.worker REQUEST.json FD`. The request names the model, the
options, the stages left to run and the artifacts earlier workers made. The worker writes one
JSON message per line to file descriptor FD (never stdout, which belongs to the model):
  {"type": "usage_error", "message": ...}            the model file is unusable
  {"type": "loaded", "model": ..., "environment": ...}
  {"type": "start", "stage": name}
  {"type": "result", "result": StageResult, "artifacts": {...}}
  {"type": "done"}
A worker that dies mid-stage simply stops writing; the supervisor records the crash and starts
another for the remaining stages.
"""

from __future__ import annotations

import json
import os
import sys
from pathlib import Path


def _send(stream, **message) -> None:
    stream.write(json.dumps(message) + "\n")
    stream.flush()


def _save_inputs(spec, workdir: Path) -> None:
    import numpy as np

    arrays = {}
    for index, input_set in enumerate(spec.input_sets):
        for leaf_index, leaf in enumerate(input_set.leaves()):
            arrays[f"set{index}_input{leaf_index}"] = leaf.detach().cpu().numpy()
    np.savez(workdir / "inputs.npz", **arrays)


PRELUDE = '''\
"""Reproduces compatcheck's {stage} stage for {model}. Run it from any directory."""
import importlib.util
import os

import torch
from torch.export import Dim

os.chdir(os.path.dirname(os.path.abspath(__file__)))
spec = importlib.util.spec_from_file_location("user_model", {model!r})
module = importlib.util.module_from_spec(spec)
spec.loader.exec_module(module)
torch.manual_seed(0)
model = module.{factory}().eval()
torch.manual_seed(0)
raw = module.get_inputs()
raw = raw if isinstance(raw, list) else [raw]
input_sets = [((x,), {{}}) if isinstance(x, torch.Tensor) else ((), x) if isinstance(x, dict) else (x, {{}})
              for x in raw]
dynamic_shapes = {dynamic}

'''


def _write_reproducers(spec, ctx, stages, workdir: Path) -> None:
    from compatcheck.spec import describe_dynamic_shapes

    dynamic = describe_dynamic_shapes(spec.dynamic_shapes)
    if dynamic and not spec.dynamic_shapes_inferred:
        dynamic = "module.get_dynamic_shapes()"
    dynamic = (dynamic or "None").replace("DYNAMIC", "Dim.DYNAMIC").replace("AUTO", "Dim.AUTO")
    for stage in stages:
        body = stage.reproduce(ctx)
        if body:
            text = PRELUDE.format(stage=stage.name, model=str(spec.path), factory=spec.factory, dynamic=dynamic)
            (workdir / f"reproduce_{stage.name}.py").write_text(text + body)


def main(argv: list[str]) -> int:
    request = json.loads(Path(argv[0]).read_text())
    stream = os.fdopen(int(argv[1]), "w")

    from compatcheck.errors import UsageError
    from compatcheck.options import RunOptions
    from compatcheck.spec import describe_dynamic_shapes, load

    try:
        spec = load(Path(request["model"]), request["factory"])
    except UsageError as exc:
        _send(stream, type="usage_error", message=str(exc))
        return 0

    from compatcheck import environment, stages
    from compatcheck.harness import run_stage
    from compatcheck.report.model import ModelInfo
    from compatcheck.stages.base import StageContext

    workdir = Path(request["workdir"])
    options = RunOptions.model_validate(request["options"])
    info = ModelInfo(
        path=str(spec.path), factory=spec.factory, input_sets=len(spec.input_sets),
        input_shapes=[[list(t.shape) for t in s.leaves()] for s in spec.input_sets],
        dynamic_shapes=describe_dynamic_shapes(spec.dynamic_shapes),
        dynamic_shapes_inferred=spec.dynamic_shapes_inferred, tolerance=spec.tolerance,
    )
    _send(stream, type="loaded", model=info.model_dump(), environment=environment.collect())

    ctx = StageContext(spec, options, workdir, dict(request["artifacts"]), dict(request["previous"]))
    todo = [stages.load(name) for name in request["stages"]]
    if request["save_inputs"]:
        _save_inputs(spec, workdir)
    if request["reproducers"]:
        _write_reproducers(spec, ctx, todo, workdir)
    for stage in todo:
        _send(stream, type="start", stage=stage.name)
        result = run_stage(stage, ctx)
        ctx.previous[stage.name] = result.status.value
        _send(stream, type="result", result=result.model_dump(mode="json"), artifacts=ctx.artifacts)
    _send(stream, type="done")
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
