"""The command line. Imports no torch: the worker does that."""

from __future__ import annotations

import os
import signal
import sys
from pathlib import Path
from typing import Optional

import typer
from rich.console import Console

from compatcheck import __version__
from compatcheck.errors import UsageError

app = typer.Typer(
    add_completion=False, no_args_is_help=True, pretty_exceptions_enable=False,
    help="Walk a PyTorch model down the deployment ladder and say what blocks each step.",
)
err = Console(stderr=True, highlight=False)

EXIT_FAILED = 1
EXIT_USAGE = 2


def _names(value: str | None) -> list[str] | None:
    return [v.strip() for v in value.split(",") if v.strip()] if value else None


def _writable_file(path: Path | None, what: str) -> None:
    if path is None:
        return
    parent = path.resolve().parent
    if path.is_dir():
        raise UsageError(f"{what} {path} is a directory")
    if not parent.is_dir() or not os.access(parent, os.W_OK):
        raise UsageError(f"cannot write {what} {path}: folder {parent} is missing or not writable")


def _writable_dir(path: Path | None, what: str) -> None:
    if path is None:
        return
    try:
        path.mkdir(parents=True, exist_ok=True)
    except OSError as exc:
        raise UsageError(f"cannot create {what} {path}: {exc.strerror}") from None
    if not os.access(path, os.W_OK):
        raise UsageError(f"cannot write into {what} {path}")


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


@app.command()
def run(
    target: str = typer.Argument(..., help="PATH[:FACTORY]: the model file, and the factory if not get_model."),
    stages: Optional[str] = typer.Option(None, "--stages", help="Comma-separated stages to run (default: all)."),
    skip: Optional[str] = typer.Option(None, "--skip", help="Comma-separated stages to leave out."),
    timeout: float = typer.Option(600.0, "--timeout", help="Seconds one stage may take before it is killed."),
    atol: Optional[float] = typer.Option(None, "--atol", help="Absolute tolerance for every float output."),
    rtol: Optional[float] = typer.Option(None, "--rtol", help="Relative tolerance for every float output."),
    onnx_exporter: str = typer.Option("dynamo", "--onnx-exporter", help="dynamo or legacy."),
    onnx_opset: Optional[int] = typer.Option(None, "--onnx-opset", help="ONNX opset (default: the exporter's)."),
    compile_backend: str = typer.Option("inductor", "--compile-backend", help="torch.compile backend."),
    json_path: Optional[Path] = typer.Option(None, "--json", help="Write the JSON report here."),
    markdown_path: Optional[Path] = typer.Option(None, "--markdown", help="Write the Markdown checklist here."),
    artifacts: Optional[Path] = typer.Option(
        None, "--artifacts", help="Keep exported files, inputs.npz and a reproduce script per stage here."),
    quiet: bool = typer.Option(False, "--quiet", "-q", help="No progress, only the table."),
) -> None:
    """Run the model through every stage and compare each with eager."""
    from pydantic import ValidationError

    from compatcheck import stages as ladder
    from compatcheck.options import RunOptions
    from compatcheck.report.console import render
    from compatcheck.runner import execute, write_atomically
    from compatcheck.spec import check_model_path, parse_target

    model, factory = parse_target(target)
    check_model_path(model)
    if timeout <= 0:
        raise UsageError(f"--timeout must be a positive number of seconds, got {timeout:g}")
    for name, value in (("--atol", atol), ("--rtol", rtol)):
        if value is not None and value < 0:
            raise UsageError(f"{name} must be non-negative, got {value:g}")
    _writable_file(json_path, "--json")
    _writable_file(markdown_path, "--markdown")
    _writable_dir(artifacts, "--artifacts")
    try:
        options = RunOptions(
            stages=ladder.select(_names(stages), _names(skip)), timeout=timeout, atol=atol, rtol=rtol,
            onnx_exporter=onnx_exporter, onnx_opset=onnx_opset, compile_backend=compile_backend,
        )
    except ValidationError as exc:
        first = exc.errors()[0]
        raise UsageError(f"--{str(first['loc'][0]).replace('_', '-')}: {first['msg']}") from None

    console = Console()
    signal.signal(signal.SIGTERM, _sigterm_as_interrupt)
    with console.status("starting the worker", spinner="dots") if not quiet else _nothing() as status:
        def on_event(kind, stage, result):
            if status is None:
                return
            if kind == "start":
                status.update(f"running [bold]{stage}[/]")
            elif result is not None:
                console.print(f"  {stage}: {result.status.value} ({result.seconds:.1f}s)", highlight=False)

        report = execute(model.resolve(), factory, options, artifacts_dir=artifacts,
                         command=["compatcheck", *sys.argv[1:]], on_event=on_event)
    render(report, console)
    if json_path:
        write_atomically(json_path, report.model_dump_json(indent=2))
    if markdown_path:
        from compatcheck.report.markdown import checklist

        write_atomically(markdown_path, checklist(report))
    if report.interrupted:
        err.print("interrupted: the partial report was written")
        raise typer.Exit(130)
    raise typer.Exit(EXIT_FAILED if report.failed else 0)


class _nothing:
    def __enter__(self):
        return None

    def __exit__(self, *exc):
        return False


@app.command()
def checklist(
    report_path: Path = typer.Argument(..., help="A JSON report written by `run --json`."),
    output: Optional[Path] = typer.Option(None, "-o", "--output", help="Write here instead of stdout."),
) -> None:
    """Turn a JSON report into a Markdown downgrade checklist."""
    from compatcheck.report.markdown import checklist as render_checklist
    from compatcheck.report.model import load_report
    from compatcheck.runner import write_atomically

    _writable_file(output, "--output")
    text = render_checklist(load_report(report_path))
    if output:
        write_atomically(output, text)
    else:
        sys.stdout.write(text)


def main() -> None:
    try:
        app(standalone_mode=True)
    except UsageError as exc:
        err.print(f"error: {exc}", markup=False)
        sys.exit(EXIT_USAGE)
