"""The terminal view of a report: a rich table, one row per stage, and the findings under it."""

from __future__ import annotations

from rich.console import Console
from rich.markup import escape
from rich.table import Table

from compatcheck.report.model import Report, Status

STYLE = {
    Status.PASS: "green", Status.MISMATCH: "yellow", Status.FAIL: "red",
    Status.SKIP: "dim", Status.CRASH: "bold red", Status.TIMEOUT: "magenta",
}


def _error(value: float | None) -> str:
    return "" if value is None else f"{value:.2e}"


def render(report: Report, console: Console) -> None:
    title = report.model.path if report.model else "compatcheck"
    if report.model:
        shapes = "; ".join(" ".join("x".join(map(str, s)) for s in one) for one in report.model.input_shapes)
        title += f"  ({report.model.input_sets} input sets: {shapes})"
    table = Table(title=title, title_justify="left", expand=False)
    table.add_column("stage")
    table.add_column("verdict")
    table.add_column("max abs err", justify="right")
    table.add_column("seconds", justify="right")
    table.add_column("reason", overflow="fold")
    for stage in report.stages:
        table.add_row(
            stage.name, f"[{STYLE[stage.status]}]{stage.status.value}[/]", _error(stage.max_abs_error),
            f"{stage.seconds:.1f}", escape(stage.reason or ""),
        )
    console.print(table)
    if report.model and report.model.dynamic_shapes:
        how = "inferred from the input sets" if report.model.dynamic_shapes_inferred else "from get_dynamic_shapes()"
        console.print(f"dynamic shapes ({how}): {report.model.dynamic_shapes}")
    for finding in report.findings:
        where = f"{finding.file}:{finding.line}" if finding.file and finding.line else "-"
        console.print(f"[bold]{finding.stage}[/] {finding.kind} {escape(where)}: {escape(finding.message)}",
                      highlight=False)
        if finding.rewrite:
            console.print(f"    rewrite: {escape(finding.rewrite)}", highlight=False)
    deepest = report.deepest_pass()
    console.print(f"deepest stage reached: {deepest or 'none'}   total {report.seconds:.1f}s")
