"""The Python API: `check()` a model, or `assert_deployable()` it inside a test suite.

`model` is a torch.nn.Module object (a torch.fx.GraphModule too; not TorchScript, nor an exported
program: their forward is no longer Python) or a "path.py[:factory]" string, as on the command line. An
object goes to the worker processes as a pickled file (payload.py), so a stage that crashes or
hangs cannot take the caller's process down; `isolate=False` runs the stages in this process
instead, for models that cannot be pickled.
"""

from __future__ import annotations

import sys
from pathlib import Path

from compatcheck.errors import UsageError
from compatcheck.report.model import Report, Status

_PACKAGE_DIR = Path(__file__).resolve().parent


def _caller_file() -> Path:
    """The file of the innermost frame outside compatcheck: the user's test or script."""
    frame = sys._getframe(1)
    while frame is not None and _PACKAGE_DIR in Path(frame.f_code.co_filename).resolve().parents:
        frame = frame.f_back
    return Path(frame.f_code.co_filename).resolve() if frame is not None else Path.cwd() / "<unknown>"


def _source_file(model) -> Path:
    """The file defining the model's class when it is the user's, else the caller's file: the
    findings point into it and the files beside it."""
    import inspect

    try:
        source = Path(inspect.getsourcefile(type(model)) or "").resolve()
    except TypeError:
        return _caller_file()
    if not source.is_file() or {"site-packages", "dist-packages"} & set(source.parts):
        return _caller_file()
    return source


def _say(line: str) -> None:
    """What the run has to tell besides the report (a cache entry it ignored, a file it did not write): on
    stderr, as the command line says it."""
    from compatcheck.untrusted import clean

    print(clean(line, lines=True), file=sys.stderr)


def check(model, inputs=None, *, dynamic_shapes=None, tolerance: dict | None = None, batch_dim=0,
          isolate: bool = True, **options) -> Report:
    """Walk `model` down the ladder and return the report `compatcheck run --json` writes.

    `inputs` is one input set or a list of them, as `get_inputs()` returns (leave it out for a
    model file). `options` are `compatcheck run`'s, with the same names and defaults (`stages`,
    `skip`, `atol`, `rtol`, `timeout`, `onnx_exporter`, `cache`, `artifacts`, ...: the options table,
    compatcheck/options.py). `dynamic_shapes`, `tolerance` and `batch_dim` are what a model file's
    `get_dynamic_shapes()`, `TOLERANCE` and `BATCH_DIM` give. A bad argument raises
    compatcheck.UsageError with a one-line reason.
    """
    from compatcheck.options import parse
    from compatcheck.session.run import RunRequest, execute

    chosen = parse(options)
    if chosen.artifacts is not None:
        chosen.artifacts = chosen.artifacts.resolve()
        chosen.artifacts.mkdir(parents=True, exist_ok=True)
    command = ["compatcheck.check", type(model).__name__ if not isinstance(model, (str, Path)) else str(model)]
    run = {"chosen": chosen, "command": command, "say": _say}

    if isinstance(model, (str, Path)):
        from compatcheck.target import check_model_path, parse_target

        path, factory = parse_target(str(model))
        try:
            check_model_path(path)
        except UsageError as exc:
            raise UsageError(f"{exc}; {TAKES}") from None
        if inputs is not None or dynamic_shapes is not None or tolerance is not None or batch_dim != 0:
            raise UsageError("a model file brings its own inputs, dynamic shapes, TOLERANCE and BATCH_DIM; "
                             "pass inputs, dynamic_shapes, tolerance and batch_dim only with a model object")
        return execute(RunRequest(path.resolve(), factory, **run))

    refused = _refusal(model)
    if refused:
        raise UsageError(f"{refused}; {TAKES}")
    if inputs is None:
        raise UsageError("check(model, inputs): a model object needs its inputs (an input set or a list of them)")
    from compatcheck.spec import check_batch_dim, named_inputs

    sets, _ = named_inputs(model, inputs, "inputs")  # bad inputs fail here, before a worker starts
    check_batch_dim(batch_dim, sets, "batch_dim")
    source = _source_file(model)
    factory = type(model).__qualname__
    parts = {"inputs": inputs, "dynamic_shapes": dynamic_shapes, "tolerance": tolerance, "batch_dim": batch_dim}
    if not isolate:
        return _check_in_process(model, parts, source, run)

    from compatcheck.payload import pack

    return execute(RunRequest(source, factory, payload=pack(model, parts, source), **run))


TAKES = ("check() takes a torch.nn.Module whose forward is Python code, with its inputs, or a model file "
         "'path.py[:factory]'")


def _refusal(model) -> str | None:
    """What the model is, where check() cannot take it: the stages make TorchScript and exported programs
    from a module's Python forward, and read its source for the findings."""
    import torch

    # ExportedProgram.module()'s class, private: looked up only where it was made (importing it imports dynamo)
    unlifted = getattr(sys.modules.get("torch.export._unlift"), "_StatefulGraphModule", ())
    if isinstance(model, torch.export.ExportedProgram):
        return ("model is a torch.export ExportedProgram: pass the module you exported, the export stage "
                "exports it")
    # ExportedProgram.module(): a GraphModule that cannot be put in eval mode nor pickled
    if isinstance(model, unlifted):
        return ("model is the module of a torch.export ExportedProgram (ExportedProgram.module()): pass the "
                "module you exported, the export stage exports it")
    if isinstance(model, torch.jit.ScriptModule):
        return ("model is a TorchScript module (torch.jit.script or torch.jit.trace made it), whose forward is "
                "no longer Python: pass the module you scripted or traced, the jit_script and jit_trace stages "
                "make TorchScript from it")
    if not isinstance(model, torch.nn.Module):
        what = "None" if model is None else f"a {type(model).__name__}"
        wrap = ": wrap it in a torch.nn.Module whose forward calls it" if callable(model) else ""
        return f"model is {what}{wrap}"
    return None


def _check_in_process(model, parts: dict, source, run: dict) -> Report:
    from compatcheck.session.run import RunRequest, execute
    from compatcheck.spec import INFER, assemble

    modes = {module: module.training for module in model.modules()}  # the stages run it in eval mode
    try:
        dynamic_shapes = parts["dynamic_shapes"]
        spec = assemble(source, type(model).__qualname__, model, parts["inputs"], "inputs",
                        INFER if dynamic_shapes is None else dynamic_shapes, parts["tolerance"], "tolerance",
                        is_object=True, batch_dim=(parts["batch_dim"], "batch_dim"))
        return execute(RunRequest(source, spec.factory, spec=spec, **run))
    finally:
        for module, training in modes.items():
            module.training = training


def _targets(names: list[str]) -> list[str]:
    """Stage names for targets given as stages or routes ("onnx": onnx_export and onnxruntime)."""
    from compatcheck import ladder

    resolved = []
    for name in names:
        if name in ladder.BY_NAME:
            resolved.append(name)
        elif name in ladder.ROUTE:
            resolved.append(ladder.ROUTE[name].target)
        else:
            raise UsageError(f"unknown target {name!r}; targets are the stages ({', '.join(ladder.NAMES)}) "
                             f"or the routes ({', '.join(ladder.ROUTE)})")
    return resolved


def assert_deployable(model, inputs=None, targets=("onnxruntime",), **options) -> Report:
    """Raise AssertionError unless every stage on the way to each target passes.

    The way to a target is its `requires` chain from eager (for onnxruntime: eager, onnx_export,
    onnxruntime), not every stage before it in the ladder. The message is the checklist of the
    stages that did not pass: verdict, the user's file:line, the source line and the rewrite.
    Returns the report when they all pass.
    """
    from compatcheck import ladder
    from compatcheck.report.failure import failure_text

    __tracebackhide__ = True  # pytest shows the test's line and this message, not compatcheck's frames
    if isinstance(targets, str):
        targets = [targets]
    wanted = ladder.select(_targets(list(targets)), None)  # each target and the stages it requires
    if options.get("stages") is not None:
        raise UsageError("assert_deployable() chooses the stages from targets; leave out stages")
    report = check(model, inputs, stages=wanted, **options)
    blocked = [stage for stage in report.stages if stage.status is not Status.PASS]
    if blocked:
        raise NotDeployable(failure_text(blocked, targets), report)
    return report


class NotDeployable(AssertionError):
    """assert_deployable()'s failure; `report` is the whole report."""

    def __init__(self, message: str, report: Report):
        super().__init__(message)
        self.report = report
