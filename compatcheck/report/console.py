"""The terminal view of a report: a rich table, one row per stage, and the findings under it.

Every text the model controls goes through `_text` (untrusted.clean, then rich's markup escaping), and
lines that carry it are printed without rich's wrapping, so each line starts where compatcheck starts
it: nothing the model wrote can begin a line of its own (a GitHub workflow command).
"""

from __future__ import annotations

import textwrap
from pathlib import Path

from rich.console import Console
from rich.markup import escape
from rich.table import Table

from compatcheck.report.model import Report, RewriteStatus, RouteStatus, Status, shown_error
from compatcheck.untrusted import clean

STYLE = {
    Status.PASS: "green", Status.MISMATCH: "yellow", Status.FAIL: "red",
    Status.SKIP: "dim", Status.CRASH: "bold red", Status.TIMEOUT: "magenta",
    Status.BROKEN_ENV: "bold magenta", Status.INTERNAL: "bold magenta",
}

WIDE = 120  # columns from which the reasons fit in the table

REWRITE_STYLE = {RewriteStatus.PROVEN: "green", RewriteStatus.PARTIAL: "yellow", RewriteStatus.REFUTED: "red",
                 RewriteStatus.NOT_COVERED: "dim"}
ROUTE_STYLE = {RouteStatus.WORKS: "green", RouteStatus.WARNS: "yellow", RouteStatus.BLOCKED: "red",
               RouteStatus.UNCHECKED: "dim"}


def _error(value: float | None) -> str:
    return "" if value is None else f"{value:.2e}"


def _shown(path: str) -> str:
    try:
        return str(Path(path).relative_to(Path.cwd()))
    except ValueError:
        return path


def _text(text: str | None, lines: bool = False) -> str:
    return escape(clean(text, lines=lines))


def render(report: Report, console: Console) -> None:
    def say(text: str) -> None:
        console.print(text, highlight=False, soft_wrap=True)

    if report.model:
        # Each set's tensors' shapes as torch prints them: [2, 4] and [] for a 0-d tensor.
        shapes = "; ".join(", ".join(f"[{', '.join(map(str, s))}]" for s in one) for one in report.model.input_shapes)
        say(f"[bold]{_text(_shown(report.model.path))}[/]: {report.model.input_sets} input sets, shapes {_text(shapes)}")
    # The reasons go in the table only where it is wide enough to hold them: in a pipe or a CI log
    # (80 columns) they are printed below it, one line each, for the log viewer to wrap at words.
    wide = console.is_terminal and console.width >= WIDE
    table = Table(expand=False)
    for column, justify in (("stage", "left"), ("verdict", "left"), ("max abs err", "right"), ("seconds", "right")):
        table.add_column(column, justify=justify)
    if wide:
        table.add_column("reason", overflow="fold")
    for stage in report.stages:
        reason = stage.reason if stage.status is not Status.PASS else None  # a pass's reason is a note
        table.add_row(
            stage.name, f"[{STYLE[stage.status]}]{stage.status.value}[/]" + (" (cached)" if stage.cached else ""),
            _error(shown_error(stage, stage.max_abs_error)), f"{stage.seconds:.1f}",
            *([_text(reason)] if wide else []))
    console.print(table)
    if not wide:
        for stage in (one for one in report.stages if one.reason and one.status is not Status.PASS):
            say(f"[bold]{stage.name}[/] [{STYLE[stage.status]}]{stage.status.value}[/]: {_text(stage.reason)}")
    notes = [stage for stage in report.stages if stage.reason and stage.status is Status.PASS]
    if notes:
        say("notes:\n" + "\n".join(f"    {stage.name}: {_text(stage.reason)}" for stage in notes))
    render_speed(report, console)
    if report.model and report.model.dynamic_shapes:
        how = "inferred from the input sets" if report.model.dynamic_shapes_inferred else "from get_dynamic_shapes()"
        say(f"dynamic shapes ({how}): {_text(report.model.dynamic_shapes)}")
    swept = report.swept_summary()
    if swept:
        say(_text(swept))
    shown_rewrites: set[str] = set()
    shown_advice: set[str] = set()
    for finding in report.findings:
        say(f"[bold]{finding.stage}[/] {_text(finding.kind)} {_text(finding.where or '-')}: "
            f"{_text(finding.message, lines=True)}")
        if finding.code:
            say(f"    > {_text(finding.code)}")
        if finding.library_file:
            say(f"    in {_text(finding.library_where or finding.library_file)}")
            if finding.library_code:
                say(f"    > {_text(finding.library_code)}")
        if finding.advice and finding.advice in shown_advice:
            say("    advice: as above")
        elif finding.advice:
            shown_advice.add(finding.advice)
            say("    advice: " + _text(finding.advice, lines=True))
        if finding.kind == "proven-rewrite":
            say("    rewrite: its diff is below")
        elif finding.rewrite and finding.rewrite in shown_rewrites:
            say("    rewrite: as above")
        elif finding.rewrite:
            shown_rewrites.add(finding.rewrite)
            say("    rewrite:\n" + textwrap.indent(_text(finding.rewrite, lines=True), "      "))
    for stage in report.stages:  # what each recipe reached, and where it stopped
        if stage.recipes:
            say(f"[bold]{stage.name}[/] recipes tried:\n" + "\n".join(f"    {_text(one)}" for one in stage.recipes))
    width = max((len(route.name) for route in report.routes), default=0)
    for route in report.routes:
        say(f"route {route.name.ljust(width)}  [{ROUTE_STYLE[route.status]}]{_text(route.summary)}[/]")
    console.print(f"total {report.seconds:.1f}s")


def render_rewrites(report: Report, console: Console) -> None:
    """`compatcheck fix`'s rewrites: what each one's run showed, the diff of each proven one, and every
    stage's verdict before and after each."""
    if not report.rewrites:
        return
    for number, rewrite in enumerate(report.rewrites, 1):
        style = REWRITE_STYLE[rewrite.status]
        console.print(f"rewrite #{number} [{style}]{rewrite.status.value}[/]: {_text('; '.join(rewrite.parts))}: "
                      f"{_text(rewrite.why)}", highlight=False, soft_wrap=True)
        if rewrite.status is RewriteStatus.PROVEN:
            for line in clean(rewrite.diff, lines=True).splitlines():
                colour = "green" if line.startswith("+") else "red" if line.startswith("-") else None
                console.print(f"[{colour}]{escape(line)}[/]" if colour else escape(line), highlight=False,
                              soft_wrap=True)
    seconds = sum(rewrite.seconds for rewrite in report.rewrites)
    console.print(f"fix: {len(report.rewrites)} rewritten cop{'y' if len(report.rewrites) == 1 else 'ies'} run "
                  f"through every stage in {seconds:.1f}s, after the run's {report.seconds:.1f}s", highlight=False)
    table = Table(title="before → after", expand=False)
    table.add_column("stage")
    table.add_column("before")
    for number in range(1, len(report.rewrites) + 1):
        table.add_column(f"#{number}")
    for stage in report.stages:
        after = [rewrite.after.get(stage.name) for rewrite in report.rewrites]
        table.add_row(stage.name, f"[{STYLE[stage.status]}]{stage.status.value}[/]",
                      *(f"[{STYLE[one]}]{one.value}[/]" if one else "-" for one in after))
    console.print(table)


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
