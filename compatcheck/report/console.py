"""The terminal view of a report: a rich table, one row per stage, and the findings under it."""

from __future__ import annotations

import textwrap
from pathlib import Path

from rich.console import Console
from rich.markup import escape
from rich.table import Table

from compatcheck.report.model import Report, RouteStatus, Status

STYLE = {
    Status.PASS: "green", Status.MISMATCH: "yellow", Status.FAIL: "red",
    Status.SKIP: "dim", Status.CRASH: "bold red", Status.TIMEOUT: "magenta",
    Status.BROKEN_ENV: "bold magenta",
}

ROUTE_STYLE = {RouteStatus.WORKS: "green", RouteStatus.WARNS: "yellow", RouteStatus.BLOCKED: "red",
               RouteStatus.UNCHECKED: "dim"}


def _error(value: float | None) -> str:
    return "" if value is None else f"{value:.2e}"


def _shown(path: str) -> str:
    try:
        return str(Path(path).relative_to(Path.cwd()))
    except ValueError:
        return path


def render(report: Report, console: Console) -> None:
    if report.model:
        shapes = "  ".join("(" + ", ".join("x".join(map(str, s)) for s in one) + ")" for one in report.model.input_shapes)
        console.print(f"[bold]{escape(_shown(report.model.path))}[/]: {report.model.input_sets} input sets {shapes}",
                      highlight=False)
    table = Table(expand=False)
    table.add_column("stage")
    table.add_column("verdict")
    table.add_column("max abs err", justify="right")
    table.add_column("seconds", justify="right")
    table.add_column("reason", overflow="fold")
    for stage in report.stages:
        table.add_row(
            stage.name, f"[{STYLE[stage.status]}]{stage.status.value}[/]" + (" (cached)" if stage.cached else ""),
            _error(stage.max_abs_error),
            f"{stage.seconds:.1f}", escape(stage.reason or ""),
        )
    console.print(table)
    render_speed(report, console)
    if report.model and report.model.dynamic_shapes:
        how = "inferred from the input sets" if report.model.dynamic_shapes_inferred else "from get_dynamic_shapes()"
        console.print(f"dynamic shapes ({how}): {report.model.dynamic_shapes}")
    swept = report.swept_summary()
    if swept:
        console.print(escape(swept), highlight=False)
    shown_rewrites: set[str] = set()
    shown_advice: set[str] = set()
    for finding in report.findings:
        console.print(f"[bold]{finding.stage}[/] {finding.kind} {escape(finding.where or '-')}: {escape(finding.message)}",
                      highlight=False)
        if finding.code:
            console.print(f"    > {escape(finding.code)}", highlight=False)
        if finding.library_file:
            console.print(f"    in {escape(finding.library_file)}:{finding.library_line}", highlight=False)
            if finding.library_code:
                console.print(f"    > {escape(finding.library_code)}", highlight=False)
        if finding.advice and finding.advice in shown_advice:
            console.print("    advice: as above", highlight=False)
        elif finding.advice:
            shown_advice.add(finding.advice)
            console.print("    advice: " + escape(finding.advice), highlight=False)
        if finding.rewrite and finding.rewrite in shown_rewrites:
            console.print("    rewrite: as above", highlight=False)
        elif finding.rewrite:
            shown_rewrites.add(finding.rewrite)
            console.print("    rewrite:\n" + textwrap.indent(escape(finding.rewrite), "      "), highlight=False)
    width = max((len(route.name) for route in report.routes), default=0)
    for route in report.routes:
        console.print(f"route {route.name.ljust(width)}  [{ROUTE_STYLE[route.status]}]{escape(route.summary)}[/]",
                      highlight=False)
    console.print(f"total {report.seconds:.1f}s")


def render_speed(report: Report, console: Console) -> None:
    timings = [t for stage in report.stages for t in stage.timings]
    render_concurrency(report, console)
    if not timings:
        return
    table = Table(title="deployment speed (--bench)", title_justify="left")
    for column in ("artifact", "input set", "p50 ms", "p95 ms", "samples/s", "vs eager", "iterations"):
        table.add_column(column, justify="left" if column == "artifact" else "right")
    for t in timings:
        table.add_row(
            t.label, str(t.input_set + 1), f"{t.p50_ms:.3f}", f"{t.p95_ms:.3f}",
            f"{t.throughput:,.0f}" if t.throughput else "", f"{t.speedup_vs_eager:.2f}x" if t.speedup_vs_eager else "",
            f"{t.iterations}" + ("" if t.stable else " (budget)"),
        )
    console.print(table)


def render_concurrency(report: Report, console: Console) -> None:
    """perf_analyzer's view of the served model: one table per backend that served it."""
    levels = [level for stage in report.stages if stage.load for level in stage.load.levels]
    for backend in dict.fromkeys(level.backend for level in levels):
        table = Table(title=f"served under concurrency (--bench): {backend}", title_justify="left")
        for column in ("protocol", "concurrency", "requests", "requests/s", "samples/s", "p50 ms", "p99 ms"):
            table.add_column(column, justify="left" if column == "protocol" else "right")
        for level in (level for level in levels if level.backend == backend):
            table.add_row(level.protocol, str(level.concurrency), str(level.requests), f"{level.throughput:,.1f}",
                          f"{level.samples_per_second:,.1f}", f"{level.p50_ms:.2f}", f"{level.p99_ms:.2f}")
        console.print(table)
