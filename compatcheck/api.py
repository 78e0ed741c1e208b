"""The Python API: `check()` a model, or `assert_deployable()` it inside a test suite.

`model` is a torch.nn.Module object or a "path.py[:factory]" string, as on the command line. An
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


def check(model, inputs=None, *, dynamic_shapes=None, tolerance: dict | None = None, isolate: bool = True,
          **options) -> Report:
    """Walk `model` down the ladder and return the report `compatcheck run --json` writes.

    `inputs` is one input set or a list of them, as `get_inputs()` returns (leave it out for a
    model file). `options` are `compatcheck run`'s, with the same names and defaults (`stages`,
    `skip`, `atol`, `rtol`, `timeout`, `onnx_exporter`, `cache`, `artifacts`, ...).
    `dynamic_shapes` and `tolerance` are what a model file's `get_dynamic_shapes()` and
    `TOLERANCE` give. A bad argument raises compatcheck.UsageError with a one-line reason.
    """
    from compatcheck.user_options import parse
    from compatcheck.session.run import execute

    chosen = parse(options)
    run_options = chosen.run_options()
    artifacts = chosen.artifacts.resolve() if chosen.artifacts else None
    if artifacts is not None:
        artifacts.mkdir(parents=True, exist_ok=True)
    command = ["compatcheck.check", type(model).__name__ if not isinstance(model, (str, Path)) else str(model)]

    if isinstance(model, (str, Path)):
        return _check_file(str(model), inputs, dynamic_shapes, tolerance, chosen, run_options, artifacts, command)

    import torch

    if not isinstance(model, torch.nn.Module):
        raise UsageError(f"model is {type(model).__name__}; expected a torch.nn.Module or a 'path.py[:factory]'")
    if inputs is None:
        raise UsageError("check(model, inputs): a model object needs its inputs (an input set or a list of them)")
    from compatcheck.spec import normalize_inputs

    normalize_inputs(inputs, "inputs")  # bad inputs fail here, before a worker starts
    source = _source_file(model)
    factory = type(model).__qualname__
    if not isolate:
        return _check_in_process(model, inputs, dynamic_shapes, tolerance, source, run_options, artifacts,
                                 command, chosen.jobs)

    from compatcheck.payload import pack

    payload = pack(model, inputs, dynamic_shapes, tolerance, source)
    cache = None
    if chosen.cache and not chosen.bench:
        from compatcheck.session.cache import StageCache, default_dir

        cache = StageCache(default_dir(), source, factory, run_options, payload=payload)
    return execute(source, factory, run_options, artifacts_dir=artifacts, command=command, jobs=chosen.jobs,
                   cache=cache, payload=payload)


def _check_file(target, inputs, dynamic_shapes, tolerance, chosen, run_options, artifacts, command) -> Report:
    from compatcheck.session.run import execute
    from compatcheck.target import check_model_path, parse_target

    if inputs is not None or dynamic_shapes is not None or tolerance is not None:
        raise UsageError("a model file brings its own inputs, dynamic shapes and TOLERANCE; "
                         "pass inputs, dynamic_shapes and tolerance only with a model object")
    path, factory = parse_target(target)
    check_model_path(path)
    cache = None
    if chosen.cache and not chosen.bench:
        from compatcheck.session.cache import StageCache, default_dir

        cache = StageCache(default_dir(), path.resolve(), factory, run_options)
    return execute(path.resolve(), factory, run_options, artifacts_dir=artifacts, command=command,
                   jobs=chosen.jobs, cache=cache)


def _check_in_process(model, inputs, dynamic_shapes, tolerance, source, run_options, artifacts, command,
                      jobs) -> Report:
    from compatcheck.session.run import execute
    from compatcheck.spec import INFER, assemble

    modes = {module: module.training for module in model.modules()}  # the stages run it in eval mode
    try:
        spec = assemble(source, type(model).__qualname__, model, inputs, "inputs",
                        INFER if dynamic_shapes is None else dynamic_shapes, tolerance, "tolerance", is_object=True)
        return execute(source, spec.factory, run_options, artifacts_dir=artifacts, command=command, jobs=jobs,
                       spec=spec)
    finally:
        for module, training in modes.items():
            module.training = training


def _targets(names: list[str]) -> list[str]:
    """Stage names for targets given as stages or routes ("onnx": export and onnxruntime)."""
    from compatcheck import ladder

    resolved = []
    for name in names:
        if name in ladder.BY_NAME:
            resolved.append(name)
        elif name in ladder.ROUTES:
            resolved.extend(ladder.ROUTES[name])
        else:
            raise UsageError(f"unknown target {name!r}; targets are the stages ({', '.join(ladder.NAMES)}) "
                             f"or the routes ({', '.join(ladder.ROUTES)})")
    return resolved


def assert_deployable(model, inputs=None, targets=("onnxruntime",), **options) -> Report:
    """Raise AssertionError unless every stage on the way to each target passes.

    The way to a target is its `requires` chain from eager (for onnxruntime: eager, onnx_export,
    onnxruntime), not every stage before it in the ladder. The message is the checklist of the
    stages that did not pass: verdict, the user's file:line, the source line and the rewrite.
    Returns the report when they all pass.
    """
    from compatcheck import ladder

    __tracebackhide__ = True  # pytest shows the test's line and this message, not compatcheck's frames
    if isinstance(targets, str):
        targets = [targets]
    wanted = ladder.select(_targets(list(targets)), None)  # each target and the stages it requires
    if options.get("stages") is not None:
        raise UsageError("assert_deployable() chooses the stages from targets; leave out stages")
    report = check(model, inputs, stages=wanted, **options)
    blocked = [stage for stage in report.stages if stage.status is not Status.PASS]
    if blocked:
        raise NotDeployable(failure_text(report, blocked, targets), report)
    return report


class NotDeployable(AssertionError):
    """assert_deployable()'s failure; `report` is the whole report."""

    def __init__(self, message: str, report: Report):
        super().__init__(message)
        self.report = report


def failure_text(report: Report, blocked, targets) -> str:
    """The short checklist pytest shows: one block per stage that did not pass."""
    lines = [f"not deployable to {', '.join(targets)}:"]
    for stage in blocked:
        lines.append(f"  {stage.name}: {stage.status.value}" + (f": {stage.reason}" if stage.reason else ""))
        for finding in stage.findings:
            where = f"{finding.file}:{finding.line}" if finding.file and finding.line else "(no line in your code)"
            lines.append(f"    {where}: {finding.kind}: {finding.message}")
            if finding.code:
                lines.append(f"      > {finding.code}")
            if finding.rewrite:
                lines.append("      rewrite:")
                lines.extend(f"        {line}" for line in finding.rewrite.splitlines())
    return "\n".join(lines)
