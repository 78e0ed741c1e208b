"""The command line. Imports no torch: the worker does that."""

from __future__ import annotations

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
from compatcheck.errors import UsageError


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


app = typer.Typer(
    cls=Group, add_completion=False, no_args_is_help=True, pretty_exceptions_enable=False,
    help="Walk a PyTorch model down the deployment ladder and say what blocks each step.",
)
err = Console(stderr=True, highlight=False)

EXIT_FAILED = 1
EXIT_USAGE = 2


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
    with os.fdopen(fd, "w") as f:
        f.write(text)
    err.print(f"error: cannot write {what} {path} ({problem}); it was written to {kept}", markup=False,
              soft_wrap=True)


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


def _version(value: bool) -> None:
    if value:
        print(f"compatcheck {__version__}")
        raise typer.Exit()


@app.callback()
def _root(
    version: bool = typer.Option(False, "--version", callback=_version, is_eager=True, help="Print the version."),
) -> None:
    pass


def _sigterm_as_interrupt(signum, frame):
    raise KeyboardInterrupt


def _with_user_options(command):
    """`command` with a flag for each of user_options.OPTIONS added after its first parameter; it
    receives their values, as check() would take them, in `chosen`."""
    import inspect

    from compatcheck.user_options import OPTIONS

    own = [p for p in inspect.signature(command, eval_str=True).parameters.values() if p.name != "chosen"]
    added = []
    for option in OPTIONS:
        if option.type is bool:
            annotation, default = bool, False  # a flag; --no-NAME for an option that defaults to True
        else:
            annotation = str if option.type is list else option.type
            annotation, default = (Optional[annotation] if option.default is None else annotation), option.default
        declared = [option.flag, *([option.short] if option.short else [])]
        # Choices are checked by parse(), as for check(); the help still lists them.
        metavar = f"<{'|'.join(option.choices)}>" if option.choices else None
        added.append(inspect.Parameter(option.name, inspect.Parameter.KEYWORD_ONLY, annotation=annotation,
                                       default=typer.Option(default, *declared, help=option.help, metavar=metavar)))
    rest = [p.replace(kind=inspect.Parameter.KEYWORD_ONLY) for p in own[1:]]
    parameters = [own[0], *added, *rest]

    def with_options(**values):
        chosen = {}
        for option in OPTIONS:
            value = values.pop(option.name)
            if option.type is bool and option.default:
                value = not value
            elif option.type is list and value is not None:
                value = [name.strip() for name in value.split(",") if name.strip()]
            chosen[option.name] = value
        return command(**values, chosen=chosen)

    with_options.__name__, with_options.__doc__ = command.__name__, command.__doc__
    with_options.__signature__ = inspect.Signature(parameters)
    with_options.__annotations__ = {p.name: p.annotation for p in parameters}
    return with_options


@app.command("run", cls=Command)
@_with_user_options
def run(
    target: str = typer.Argument(
        ..., metavar="PATH[:FACTORY]", help="The model file, and the factory if it is not get_model."),
    json_path: Optional[Path] = typer.Option(None, "--json", help="Write the JSON report here."),
    markdown_path: Optional[Path] = typer.Option(None, "--markdown", help="Write the Markdown checklist here."),
    junit_path: Optional[Path] = typer.Option(
        None, "--junit", help="Write JUnit XML here: one test case per stage, the findings in the failure text."),
    annotations: Optional[str] = typer.Option(
        None, "--annotations", help="Print each finding as a CI annotation on the user's line: github."),
    resume: bool = typer.Option(
        False, "--resume", help="Keep the verdicts of the --json report an interrupted run left; run the rest."),
    quiet: bool = typer.Option(False, "--quiet", "-q", help="No progress, only the table."),
    chosen: dict = None,
) -> None:
    """Run the model through every stage and compare each with eager."""
    from compatcheck.session.cache import StageCache
    from compatcheck.session.cache import default_dir as default_cache_dir
    from compatcheck.files import write_atomically
    from compatcheck.report.console import render
    from compatcheck.session.run import execute
    from compatcheck.target import check_model_path, parse_target
    from compatcheck.user_options import parse

    model, factory = parse_target(target)
    check_model_path(model)
    if resume and json_path is None:
        raise UsageError("--resume needs --json: the report to resume from")
    if annotations not in (None, "github"):
        raise UsageError(f"--annotations must be github, got {annotations!r}")
    chosen = parse(chosen, flags=True)
    artifacts = chosen.artifacts
    previous = _previous_report(json_path) if resume else None
    inputs = dict.fromkeys(previous.dependencies if previous else (), "a file the resumed run loaded")
    inputs[str(model.resolve())] = "the model file"
    if chosen.rewrites is not None:
        inputs[str(chosen.rewrites)] = "the --rewrites catalog"
    _writable_file(json_path, "--json", inputs)
    _writable_file(markdown_path, "--markdown", inputs)
    _writable_file(junit_path, "--junit", inputs)
    _writable_dir(artifacts, "--artifacts")
    options = chosen.run_options()

    console = Console()
    signal.signal(signal.SIGTERM, _sigterm_as_interrupt)
    with console.status("starting the worker", spinner="dots") if not quiet else nullcontext() as status:
        def on_event(kind, stage, result):
            if status is None:
                return
            if kind == "start":
                status.update(f"running [bold]{stage}[/]")
            elif result is not None:
                console.print(f"  {stage}: {result.status.value} ({result.seconds:.1f}s)", highlight=False)

        # Timings are of this machine now: never served from the cache.
        cache = StageCache(default_cache_dir(), model.resolve(), factory, options) if chosen.cache and not chosen.bench \
            else None
        report = execute(model.resolve(), factory, options, artifacts_dir=artifacts,
                         command=["compatcheck", *sys.argv[1:]], on_event=on_event, jobs=chosen.jobs,
                         previous=previous, cache=cache, protected=set(inputs),
                         say=lambda line: err.print(line, markup=False, soft_wrap=True))
    render(report, console)
    if artifacts and chosen.bench:
        from compatcheck.report.chart import latency_svg

        chart = latency_svg(report)
        if chart:
            write_atomically(artifacts / "latency.svg", chart)
    if json_path:
        _write_output(json_path, report.model_dump_json(indent=2), "--json", report)
    if markdown_path:
        from compatcheck.report.markdown import checklist

        _write_output(markdown_path, checklist(report), "--markdown", report)
    if junit_path:
        from compatcheck.report.ci import junit

        _write_output(junit_path, junit(report), "--junit", report)
    if annotations:
        from compatcheck.report.ci import github_annotations

        for line in github_annotations(report):
            print(line)
    if report.interrupted:
        err.print("interrupted: the partial report was written")
        raise typer.Exit(130)
    raise typer.Exit(EXIT_FAILED if report.failed else 0)


@app.command(cls=Command)
def checklist(
    report_path: Path = typer.Argument(..., help="A JSON report written by `run --json`."),
    output: Optional[Path] = typer.Option(None, "-o", "--output", help="Write here instead of stdout."),
) -> None:
    """Turn a JSON report into a Markdown downgrade checklist."""
    from compatcheck.files import write_atomically
    from compatcheck.report.markdown import checklist as render_checklist
    from compatcheck.report.model import load_report

    _writable_file(output, "--output")
    text = render_checklist(load_report(report_path))
    if output:
        write_atomically(output, text)
    else:
        sys.stdout.write(text)


@app.command(cls=Command)
def schema() -> None:
    """Print the JSON schema of the report that `run --json` writes."""
    import json

    from compatcheck.report.model import Report

    print(json.dumps(Report.model_json_schema(), indent=2))


cache_app = typer.Typer(cls=Group, no_args_is_help=True, help="The result cache: what it holds, and emptying it.")
app.add_typer(cache_app, name="cache")


def _size(count: int) -> str:
    for unit in ("B", "KiB", "MiB", "GiB"):
        if count < 1024 or unit == "GiB":
            return f"{count:.0f} {unit}" if unit == "B" else f"{count:.1f} {unit}"
        count /= 1024
    return ""


@cache_app.command("info", cls=Command)
def cache_info() -> None:
    """Where the cache is, its size, and its entries per stage."""
    from compatcheck.session.cache import default_dir, summary

    found = summary(default_dir())
    print(f"{found['folder']}: {found['entries']} entries, {_size(found['bytes'])}"
          + (f", newest {found['newest']}" if found["newest"] else ""))
    for stage, count in sorted(found["by_stage"].items()):
        print(f"  {stage}: {count}")


@cache_app.command("clear", cls=Command)
def cache_clear() -> None:
    """Remove every cached result."""
    from compatcheck.session.cache import clear, default_dir

    print(f"removed {clear(default_dir())} entries from {default_dir()}")


@app.command("triton-repo", cls=Command)
def triton_repo(
    target: str = typer.Argument(
        ..., metavar="PATH[:FACTORY]", help="The model file, and the factory if it is not get_model."),
    output: Path = typer.Option(..., "-o", "--output", help="The repository folder to write (new or empty)."),
    backend: str = typer.Option(
        "native", "--triton-backend", help="native: onnxruntime and pytorch backends, as in the official image; "
        "python: Python-backend models that run the same files with onnxruntime or torch from the server's Python."),
    timeout: float = typer.Option(600.0, "--timeout", help="Seconds one export stage may take."),
) -> None:
    """Write a Triton model repository (ONNX and TorchScript models, config.pbtxt each) for the model."""
    from compatcheck.target import check_model_path, parse_target
    from compatcheck.triton_repo import write_repository
    from compatcheck.triton.errors import TritonError

    model, factory = parse_target(target)
    check_model_path(model)
    if backend not in ("native", "python"):
        raise UsageError(f"--triton-backend must be native or python, got {backend!r}")
    from compatcheck.user_options import parse

    parse({"timeout": timeout}, flags=True)  # the same checks as run's
    if output.is_dir() and any(output.iterdir()):
        raise UsageError(f"--output {output} is not empty")
    _writable_dir(output, "--output")
    try:
        lines = write_repository(model.resolve(), factory, output, native=backend == "native", timeout=timeout)
    except TritonError as exc:
        err.print(f"error: {exc}", markup=False)
        raise typer.Exit(EXIT_FAILED) from None
    for line in lines:
        print(line)
    print(f"repository written to {output}")


@app.command(cls=Command)
def matrix(
    matrix_path: Path = typer.Argument(..., help="matrix.yaml: environments, models and the baseline."),
    jobs: int = typer.Option(os.cpu_count() or 1, "--jobs", "-j", help="Cells to run side by side."),
    resume: bool = typer.Option(False, "--resume", help="Keep the cells a previous run into --out finished."),
    strict: bool = typer.Option(False, "--strict", help="Fail also on missing cells or stages."),
    update_baseline: bool = typer.Option(False, "--update-baseline", help="Rewrite the baseline from this run."),
    out: Path = typer.Option(Path("matrix-out"), "--out", help="Folder for cell files, logs and merged reports."),
    env_dir: Optional[Path] = typer.Option(
        None, "--env-dir", help="Where environments are built and kept (default ~/.cache/compatcheck/envs)."),
    cell: Optional[list[str]] = typer.Option(None, "--cell", help="Run only this ENVIRONMENT/MODEL cell; repeatable."),
    emit: Optional[str] = typer.Option(None, "--emit", help="Print the cells for a CI system instead: github."),
    refresh_envs: bool = typer.Option(
        False, "--refresh-envs", help="Build every environment again now (unpinned ones are re-resolved anyway "
        "once older than their refresh_after)."),
    build_only: bool = typer.Option(
        False, "--build-only", help="Build or reuse the environments the cells need, run no cell, and exit 1 if "
        "a required one fails (a matrix run started meanwhile waits for each build and reuses it)."),
) -> None:
    """Run every model in every environment; merge into one grid and gate it on the baseline."""
    from compatcheck.matrix.run import main as run_matrix

    _writable_dir(out if not emit else None, "--out")
    signal.signal(signal.SIGTERM, _sigterm_as_interrupt)
    try:
        code = run_matrix(matrix_path, Console(), jobs=jobs, resume=resume, strict=strict,
                          update_baseline=update_baseline, out=out, env_dir=env_dir, only=cell, emit_for=emit,
                          refresh_envs=refresh_envs, build_only=build_only)
    except KeyboardInterrupt:
        err.print(f"interrupted: finished cells are in {out}/cells; run again with --resume to keep them",
                  markup=False, soft_wrap=True)
        raise typer.Exit(130) from None
    raise typer.Exit(code)


@app.command(cls=Command)
def merge(
    cells: list[Path] = typer.Argument(..., help="Cell files written by `compatcheck matrix` (out/cells/*.json)."),
    baseline: Optional[Path] = typer.Option(None, "--baseline", help="Expected results to gate on."),
    out: Path = typer.Option(Path("matrix-out"), "--out", help="Folder for the merged reports."),
    strict: bool = typer.Option(False, "--strict", help="Fail also on missing cells or stages."),
) -> None:
    """Merge cell files from separate runs (CI jobs) into the grid and gate of `compatcheck matrix`."""
    from compatcheck.matrix.merge import merge_files

    _writable_dir(out, "--out")
    raise typer.Exit(merge_files(cells, baseline, out, Console(), strict=strict))


def main() -> None:
    from typer.exceptions import TyperException

    try:
        code = app(standalone_mode=False)
    except UsageError as exc:
        err.print(f"error: {exc}", markup=False, soft_wrap=True)
        sys.exit(EXIT_USAGE)
    except TyperException as exc:  # the command line itself is wrong: unknown option, bad value
        message = exc.format_message().strip()
        if message:  # empty when no arguments were given: the help was printed instead
            err.print(f"error: {message} (see --help)", markup=False, soft_wrap=True)
        sys.exit(EXIT_USAGE)
    except typer.Abort:
        sys.exit(130)
    sys.exit(code or 0)
