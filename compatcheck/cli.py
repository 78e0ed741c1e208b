"""The command line. Imports no torch: the worker does that.

Every flag comes from the options table (compatcheck/options.py): a command here declares only its
arguments, and `_with_flags` adds the rows of the table that the command takes.
"""

from __future__ import annotations

import inspect
import os
import signal
import sys
import tempfile
from contextlib import nullcontext
from pathlib import Path
from typing import Optional

import typer
from rich.console import Console
from typer.core import TyperCommand, TyperGroup

from compatcheck import __version__
from compatcheck.errors import InternalError, UsageError, one_line


class _FlagsTakeNoValue:
    """Help shows no `<bool>` beside a flag (--quiet, --help): it takes no value."""

    def get_params(self, ctx):
        params = super().get_params(ctx)
        for param in params:
            if getattr(param, "is_flag", False):
                param.metavar = ""
        return params


class Command(_FlagsTakeNoValue, TyperCommand):
    pass


class Group(_FlagsTakeNoValue, TyperGroup):
    pass


err = Console(stderr=True, highlight=False)

EXIT_FAILED = 1
EXIT_USAGE = 2
EXIT_INTERNAL = 3  # compatcheck's own code raised: no verdict on the model is lost, but an output is


def _parameter(option, **extra) -> inspect.Parameter:
    """The typer parameter of one row of the options table."""
    if option.type is bool:
        annotation, default = bool, False  # a flag; --no-NAME for an option that defaults to True
    elif option.type is list:
        annotation, default = (Optional[list[str]] if option.repeat else Optional[str]), option.default
    else:
        annotation = option.type if option.default is not None else Optional[option.type]
        default = option.default
    declared = [option.flag, *([option.short] if option.short else [])]
    # Choices are checked with the other values (options.parse, _given); the help lists them.
    metavar = f"<{'|'.join(option.choices)}>" if option.choices else option.metavar
    return inspect.Parameter(option.name, inspect.Parameter.KEYWORD_ONLY, annotation=annotation, default=typer.Option(
        default, *declared, help=option.help, metavar=metavar, **extra))


def _given(command: str, values: dict) -> dict:
    """The flags' values as the options table names them; a choice outside the row's is a usage error
    (the run options' choices are checked by options.parse, with theirs)."""
    from compatcheck.options import COMMAND_FLAGS, flags_of

    given = {}
    for option in flags_of(command):
        value = values.pop(option.name)
        if option.type is bool and option.default:
            value = not value
        elif option.type is list and value is not None and not option.repeat:
            value = [name.strip() for name in value.split(",") if name.strip()]
        if option in COMMAND_FLAGS and option.choices and value is not None and value not in option.choices:
            raise UsageError(f"{option.flag} must be {' or '.join(option.choices)}, got {value!r}")
        given[option.name] = value
    return given


def _with_flags(command: str, **extra: dict):
    """The decorated function's own parameters (its arguments), then a flag per row of the options table
    that `command` takes (with `extra[name]`'s typer settings); the function receives the flags' values
    in `given`."""

    def decorate(function):
        from compatcheck.options import flags_of

        own = [p for p in inspect.signature(function, eval_str=True).parameters.values() if p.name != "given"]
        parameters = [*own, *(_parameter(option, **extra.get(option.name, {})) for option in flags_of(command))]

        def with_flags(**values):
            given = _given(command, values)
            return function(**values, given=given)

        with_flags.__name__, with_flags.__doc__ = function.__name__, function.__doc__
        with_flags.__signature__ = inspect.Signature(parameters)
        with_flags.__annotations__ = {p.name: p.annotation for p in parameters}
        return with_flags

    return decorate


def _run_options(given: dict) -> dict:
    """The flags that are run options (check()'s keywords), for options.parse."""
    from compatcheck.options import at

    names = {option.name for option in at("cli")}
    return {name: value for name, value in given.items() if name in names}


def _writable_file(path: Path | None, what: str, inputs: dict[str, str] | None = None) -> None:
    """Refuse an output path that is an input of the run, and prove the folder takes a new file now,
    before any stage runs, rather than losing the report at the end."""
    if path is None:
        return
    resolved = str(path.resolve())
    if resolved in (inputs or {}):
        raise UsageError(f"{what} {path} is {inputs[resolved]}; writing there would destroy it")
    parent = path.resolve().parent
    if path.is_dir():
        raise UsageError(f"{what} {path} is a directory")
    try:
        fd, probe = tempfile.mkstemp(prefix=f".{path.name}.", dir=parent)
    except OSError as exc:
        raise UsageError(f"cannot write {what} {path}: {exc.strerror} in {parent}") from None
    os.close(fd)
    os.unlink(probe)


def _say(line: str) -> None:
    """One line on stderr; the paths and messages in it may be the model's."""
    from compatcheck.untrusted import clean

    err.print(clean(line, lines=True), markup=False, soft_wrap=True)


def _write_output(path: Path, text: str, what: str, report) -> None:
    """Write an output at the end; if that fails, or the path turned out to be a file the run loaded, keep the
    text in the temporary folder and say where, so a long run's report is never lost."""
    from compatcheck.files import write_atomically

    problem = None
    if str(path.resolve()) in report.dependencies:
        problem = "it is a file the run loaded"
    else:
        try:
            write_atomically(path, text)
            return
        except OSError as exc:
            problem = exc.strerror or str(exc)
    fd, kept = tempfile.mkstemp(prefix=f"compatcheck-{path.stem}-", suffix=path.suffix)
    try:
        with os.fdopen(fd, "w") as f:
            f.write(text)
    except OSError as exc:
        os.unlink(kept)
        _say(f"error: cannot write {what} {path} ({problem}), nor into {tempfile.gettempdir()} ({exc.strerror})")
        return
    _say(f"error: cannot write {what} {path} ({problem}); it was written to {kept}")


def _writable_dir(path: Path | None, what: str) -> None:
    if path is None:
        return
    try:
        path.mkdir(parents=True, exist_ok=True)
    except OSError as exc:
        raise UsageError(f"cannot create {what} {path}: {exc.strerror}") from None
    if not os.access(path, os.W_OK):
        raise UsageError(f"cannot write into {what} {path}")


def _previous_report(path: Path):
    from compatcheck.report.model import load_report

    return load_report(path) if path.exists() else None


def _sigterm_as_interrupt(signum, frame):
    raise KeyboardInterrupt


def _version(value: bool) -> None:
    if value:
        print(f"compatcheck {__version__}")
        raise typer.Exit()


def _root(given: dict = None) -> None:
    pass


def run(
    target: str = typer.Argument(
        ..., metavar="PATH[:FACTORY]", help="The model file, and the factory if it is not get_model."),
    given: dict = None,
) -> None:
    """Run the model through every stage and compare each with eager."""
    from compatcheck.options import parse
    from compatcheck.report.console import render
    from compatcheck.session.run import RunRequest, execute
    from compatcheck.target import check_model_path, parse_target

    model, factory = parse_target(target)
    check_model_path(model)
    json_path, markdown_path, junit_path = given["json"], given["markdown"], given["junit"]
    if given["resume"] and json_path is None:
        raise UsageError("--resume needs --json: the report to resume from")
    chosen = parse(_run_options(given), flags=True, door="cli")
    artifacts = chosen.artifacts
    previous = _previous_report(json_path) if given["resume"] else None
    inputs = dict.fromkeys(previous.dependencies if previous else (), "a file the resumed run loaded")
    inputs[str(model.resolve())] = "the model file"
    if chosen.rewrites is not None:
        inputs[str(chosen.rewrites)] = "the --rewrites catalog"
    _writable_file(json_path, "--json", inputs)
    _writable_file(markdown_path, "--markdown", inputs)
    _writable_file(junit_path, "--junit", inputs)
    _writable_dir(artifacts, "--artifacts")

    console = Console()
    signal.signal(signal.SIGTERM, _sigterm_as_interrupt)
    with console.status("starting the worker", spinner="dots") if not given["quiet"] else nullcontext() as status:
        def on_event(kind, stage, result):
            if status is None:
                return
            if kind == "start":
                status.update(f"running [bold]{stage}[/]")
            elif result is not None:
                console.print(f"  {stage}: {result.status.value} ({result.seconds:.1f}s)", highlight=False)

        report = execute(RunRequest(
            model.resolve(), factory, chosen, command=["compatcheck", *sys.argv[1:]], previous=previous,
            protected=set(inputs), on_event=on_event, say=_say))
    shown = _rendered("the report on the terminal", lambda: render(report, console) or True) is not None
    _offer_fix(report, model.resolve(), chosen.rewrites)
    written = _write_outputs(report, given, artifacts if chosen.bench else None)
    if report.interrupted:
        err.print("interrupted: the partial report was written")
        raise typer.Exit(130)
    for stage in report.internal_errors:
        _say(f"error: {stage.name}: {stage.reason} (a bug of compatcheck, not of the model: the stage has no "
             "verdict, the others stand); its traceback is the stage's error in the report and in the worker's log")
    internal = report.internal_errors or not (shown and written)
    raise typer.Exit(EXIT_INTERNAL if internal else EXIT_FAILED if report.failed else 0)


def _offer_fix(report, model: Path, rewrites: Path | None) -> None:
    """One line where `compatcheck fix` has a codemod that fits a finding; a failure to tell is only said."""
    from compatcheck.fix.candidates import offer

    line = _rendered("the fix offer", lambda: offer(report, model, rewrites) or "")
    if line:
        _say(line)


def fix(
    target: str = typer.Argument(
        ..., metavar="PATH[:FACTORY]", help="The model file, and the factory if it is not get_model."),
    given: dict = None,
) -> None:
    """Rewrite the model file's lines that block a stage, run every stage again on each rewrite, and show
    the rewrites that run proves (--write applies them)."""
    from compatcheck.files import MAX_SOURCE_BYTES, read_bounded
    from compatcheck.fix.prove import fix as fix_model
    from compatcheck.options import parse
    from compatcheck.report.console import render, render_rewrites
    from compatcheck.session.run import RunRequest, execute
    from compatcheck.target import check_model_path, parse_target

    model, factory = parse_target(target)
    check_model_path(model)
    if given["write"] and os.path.realpath(model) != os.path.abspath(model):
        raise UsageError(f"--write: {model} is reached through a link; nothing was written")
    chosen = parse(_run_options(given), flags=True, door="cli")
    inputs = {str(model.resolve()): "the model file"}
    _writable_file(given["json"], "--json", inputs)
    _writable_dir(chosen.artifacts, "--artifacts")
    try:
        read = read_bounded(model, MAX_SOURCE_BYTES)
        source = read.decode()
    except (OSError, ValueError) as exc:  # UnicodeDecodeError is a ValueError
        raise UsageError(f"cannot read {model} to rewrite it: {getattr(exc, 'strerror', None) or exc}") from None
    console = Console()
    signal.signal(signal.SIGTERM, _sigterm_as_interrupt)
    with console.status("running the model", spinner="dots") if not given["quiet"] else nullcontext():
        report, offered = fix_model(RunRequest(model.resolve(), factory, chosen, command=["compatcheck", *sys.argv[1:]],
                                               protected=set(inputs), say=_say), execute, source, _shown_path(model))
    shown = _rendered("the report on the terminal", lambda: (render(report, console), render_rewrites(report, console)))
    written = _write_outputs(report, {**given, "markdown": None, "junit": None, "annotations": None}, None)
    _offered(report, offered, model, read, given["write"])
    raise typer.Exit(EXIT_INTERNAL if report.internal_errors or not (shown and written) else
                     EXIT_FAILED if report.failed else 0)


def _offered(report, offered: str | None, model: Path, read: bytes, write: bool) -> None:
    """After fix: what it wrote into the model file with --write, or why it wrote nothing."""
    from compatcheck.fix.write import write_rewrite

    if report.interrupted:
        _say("interrupted: the rewrites judged so far are in the report; nothing was written")
        raise typer.Exit(130)
    if not report.rewrites:
        _say("fix: no finding on the model file's lines has a codemod that fits its code; nothing was rewritten")
    if write and offered is not None:
        write_rewrite(model, read, offered)
        _say(f"wrote the offered rewrite into {model}")
    elif write:
        _say(f"nothing written into {model}: no rewrite was proven")


def _shown_path(path: Path) -> str:
    """The model file as a diff names it: relative to the current folder, as `patch -p0` takes it there."""
    try:
        return str(path.resolve().relative_to(Path.cwd().resolve()))
    except ValueError:
        return str(path.resolve())


def _internal_error(what: str, exc: Exception) -> None:
    """compatcheck's own code raised while making `what`: one line on stderr, the traceback in a log
    file it names (or after the line, where no file can be written)."""
    import traceback

    from compatcheck.errors import one_line

    trace = "".join(traceback.format_exception(exc))
    try:
        fd, log = tempfile.mkstemp(prefix="compatcheck-internal-error-", suffix=".log")
        with os.fdopen(fd, "w") as f:
            f.write(trace)
    except OSError:
        log = None
    where = f"the traceback is in {log}" if log else "the traceback follows"
    _say(f"internal error: compatcheck failed to make {what} ({one_line(exc)}); {where}")
    if log is None:
        _say(trace)


def _rendered(what: str, make):
    """What `make()` returns; None, said as compatcheck's internal error, where it raised: one renderer's
    bug never loses the other outputs."""
    try:
        return make()
    except Exception as exc:
        _internal_error(what, exc)
        return None


def _write_outputs(report, given: dict, charts: Path | None) -> bool:
    """The files the flags asked for: --json, --markdown, --junit, the latency chart into `charts`; and
    with --annotations, the CI's lines on stdout. Each is made on its own: False where one could not be."""
    from compatcheck.report.chart import latency_svg
    from compatcheck.report.ci import github_annotations, junit
    from compatcheck.report.markdown import checklist

    outputs = {"--json": (given["json"], lambda: report.model_dump_json(indent=2)),
               "--markdown": (given["markdown"], lambda: checklist(report)),
               "--junit": (given["junit"], lambda: junit(report)),
               "the latency chart": (charts / "latency.svg" if charts else None, lambda: latency_svg(report) or "")}
    made = True
    for what, (path, make) in outputs.items():
        text = _rendered(what, make) if path else ""
        made = made and text is not None
        if text:
            _write_output(path, text, what, report)
    if given["annotations"]:
        lines = _rendered("--annotations", lambda: github_annotations(report))
        made = made and lines is not None
        for line in lines or ():
            print(line)
    return made


def checklist(
    report_path: Path = typer.Argument(..., help="A JSON report written by `run --json`."),
    given: dict = None,
) -> None:
    """Turn a JSON report into a Markdown downgrade checklist."""
    from compatcheck.files import write_atomically
    from compatcheck.report.markdown import checklist as render_checklist
    from compatcheck.report.model import load_report

    output = given["output"]
    _writable_file(output, "--output")
    report = load_report(report_path)
    text = _rendered("the checklist", lambda: render_checklist(report))
    if text is None:
        raise typer.Exit(EXIT_INTERNAL)
    if output:
        write_atomically(output, text)
    else:
        sys.stdout.write(text)


def schema(given: dict = None) -> None:
    """Print the JSON schema of the report that `run --json` writes."""
    import json

    from compatcheck.report.model import Report

    print(json.dumps(Report.model_json_schema(), indent=2))


def _size(count: float) -> str:
    for unit in ("B", "KiB", "MiB"):
        if count < 1024:
            return f"{count:.0f} {unit}" if unit == "B" else f"{count:.1f} {unit}"
        count /= 1024
    return f"{count:.1f} GiB"


def cache_info(given: dict = None) -> None:
    """Where the cache is, its size, and its entries per stage."""
    from compatcheck.session.cache import default_dir, summary

    found = summary(default_dir())
    print(f"{found['folder']}: {found['entries']} entries, {_size(found['bytes'])}"
          + (f", newest {found['newest']}" if found["newest"] else ""))
    for stage, count in sorted(found["by_stage"].items()):
        print(f"  {stage}: {count}")
    if found["others"]:
        print(f"  and {found['others']} other files or folders, which are not the cache's: `cache clear` leaves them")


def cache_clear(given: dict = None) -> None:
    """Remove every cached result, and nothing else the folder holds."""
    from compatcheck.session.cache import clear, default_dir

    print(f"removed {clear(default_dir())} entries from {default_dir()}")


def triton_repo(
    target: str = typer.Argument(
        ..., metavar="PATH[:FACTORY]", help="The model file, and the factory if it is not get_model."),
    given: dict = None,
) -> None:
    """Write a Triton model repository (ONNX and TorchScript models, config.pbtxt each) for the model."""
    from compatcheck.options import parse
    from compatcheck.target import check_model_path, parse_target
    from compatcheck.triton.errors import TritonError
    from compatcheck.triton_repo import write_repository

    model, factory = parse_target(target)
    check_model_path(model)
    output = given["output"]
    chosen = parse(_run_options(given), flags=True, door="cli")
    if output.is_dir() and any(output.iterdir()):
        raise UsageError(f"--output {output} is not empty")
    _writable_dir(output, "--output")
    try:
        lines = write_repository(model.resolve(), factory, output, native=given["triton_backend"] == "native",
                                 timeout=chosen.timeout, device=chosen.device,
                                 queue_delay_ms=chosen.triton_queue_delay)
    except TritonError as exc:
        _say(f"error: {exc}")
        raise typer.Exit(EXIT_FAILED) from None
    for line in lines:
        print(line)
    print(f"repository written to {output}")


def matrix(
    matrix_path: Path = typer.Argument(..., help="matrix.yaml: environments, models and the baseline."),
    given: dict = None,
) -> None:
    """Run every model in every environment; merge into one grid and gate it on the baseline."""
    from compatcheck.matrix.run import main as run_matrix

    out = given["out"]
    _writable_dir(out if not given["emit"] else None, "--out")
    signal.signal(signal.SIGTERM, _sigterm_as_interrupt)
    try:
        code = run_matrix(matrix_path, Console(), jobs=given["jobs"] or os.cpu_count() or 1, resume=given["resume"],
                          strict=given["strict"], update_baseline=given["update_baseline"], out=out,
                          env_dir=given["env_dir"], only=given["cell"], emit_for=given["emit"],
                          refresh_envs=given["refresh_envs"], build_only=given["build_only"])
    except KeyboardInterrupt:
        err.print(f"interrupted: finished cells are in {out}/cells; run again with --resume to keep them",
                  markup=False, soft_wrap=True)
        raise typer.Exit(130) from None
    raise typer.Exit(code)


def merge(
    cells: list[Path] = typer.Argument(..., help="Cell files written by `compatcheck matrix` (out/cells/*.json)."),
    given: dict = None,
) -> None:
    """Merge cell files from separate runs (CI jobs) into the grid and gate of `compatcheck matrix`."""
    from compatcheck.matrix.merge import merge_files

    _writable_dir(given["out"], "--out")
    raise typer.Exit(merge_files(cells, given["baseline"], given["out"], Console(), strict=given["strict"]))


def make_app() -> typer.Typer:
    """The command line, its flags made from the options table as it is now."""
    app = typer.Typer(
        cls=Group, add_completion=False, no_args_is_help=True, pretty_exceptions_enable=False,
        help="Walk a PyTorch model down the deployment ladder and say what blocks each step.",
    )
    app.callback()(_with_flags("compatcheck", version={"callback": _version, "is_eager": True})(_root))
    for name, function in (("run", run), ("fix", fix), ("checklist", checklist), ("schema", schema),
                           ("triton-repo", triton_repo), ("matrix", matrix), ("merge", merge)):
        app.command(name, cls=Command)(_with_flags(name)(function))
    cache_app = typer.Typer(cls=Group, no_args_is_help=True, help="The result cache: what it holds, and emptying it.")
    cache_app.command("info", cls=Command)(_with_flags("cache info")(cache_info))
    cache_app.command("clear", cls=Command)(_with_flags("cache clear")(cache_clear))
    app.add_typer(cache_app, name="cache")
    return app


app = make_app()


def main() -> None:
    from typer.exceptions import TyperException

    try:
        code = app(standalone_mode=False)
    except UsageError as exc:
        _say(f"error: {exc}")
        sys.exit(EXIT_USAGE)
    except TyperException as exc:  # the command line itself is wrong: unknown option, bad value
        message = exc.format_message().strip()
        if message:  # empty when no arguments were given: the help was printed instead
            _say(f"error: {message} (see --help)")
        sys.exit(EXIT_USAGE)
    except typer.Abort:
        sys.exit(130)
    except InternalError as exc:
        _internal(str(exc), exc.traceback)
    except Exception as exc:  # a bug of compatcheck's own, on this side of the workers
        import traceback

        _internal(one_line(exc), "".join(traceback.format_exception(exc)))
    sys.exit(code or 0)


def _internal(message: str, trace: str) -> None:
    """One line on an internal error of compatcheck, and its traceback kept in a file for the bug report."""
    fd, kept = tempfile.mkstemp(prefix="compatcheck-internal-error-", suffix=".log")
    with os.fdopen(fd, "w") as f:
        f.write(trace or message)
    _say(f"error: internal error of compatcheck (a bug of compatcheck, not of the model): {message}; "
         f"the traceback is in {kept}")
    sys.exit(EXIT_INTERNAL)
