"""The Markdown downgrade checklist, for a GitHub issue or pull request: how far the model got, a
box to tick per finding with the user's line and the rewrite, the numbers that held, the versions.
Text the model controls goes through untrusted.clean and is escaped, so it shows as written and never
becomes HTML, a link or a table cell of its own."""

from __future__ import annotations

import re

from compatcheck.report.model import Finding, LeafComparison, Report, RouteStatus, StageResult, Status, shown_error
from compatcheck.untrusted import clean

SYMBOL = {
    Status.PASS: "✅", Status.MISMATCH: "❗", Status.FAIL: "❌", Status.SKIP: "⏭️",
    Status.CRASH: "💥", Status.TIMEOUT: "⏱️", Status.BROKEN_ENV: "🔧",
    Status.INTERNAL: "🐞",
}
_SPECIAL = re.compile(r"([\\*_\[\]<>|#])")  # would turn text into emphasis, links, HTML or table cells


def plain(text: str | None) -> str:
    """Free text (an error message) as Markdown that shows it as written, on one line."""
    return _SPECIAL.sub(r"\\\1", " ".join(clean(text).split()))


def _fence(text: str, shortest: int) -> str:
    """Backticks one more than the longest run in `text`: a fence the text cannot close."""
    return "`" * max(shortest, max(map(len, re.findall("`+", text)), default=0) + 1)


def _code(text: str, cell: bool = False) -> str:
    """Inline code that survives backticks in the text; in a table `cell`, its pipes are escaped."""
    text = clean(text)
    if cell:
        text = text.replace("|", "\\|")
    fence, pad = _fence(text, 1), " " if "`" in text else ""
    return f"{fence}{pad}{text}{pad}{fence}"


def _block(code: str, indent: str = "  ") -> list[str]:
    code = clean(code, lines=True)
    fence = _fence(code, 3)
    return [f"{indent}{fence}python", *(f"{indent}{line}".rstrip() for line in code.splitlines()), f"{indent}{fence}"]


def _number(value: float | None) -> str:
    return "" if value is None else f"{value:.2e}"


def _ladder(report: Report) -> str:
    return " → ".join(f"{SYMBOL[s.status]} {s.name}" for s in report.stages)


def _item(finding: Finding, shown: dict[str, str]) -> list[str]:
    """One box; `shown` maps each rewrite already printed to the stage it is under, to print it once."""
    where = _code(finding.where) if finding.where else "no line in your code"
    op = f" {_code(finding.op)}" if finding.op else ""
    lines = [f"- [ ] **{finding.kind}**{op} at {where}: {plain(finding.message)}"]
    if finding.code:
        lines += _block(finding.code)
    if finding.library_file:
        lines += ["", f"  In library code, at {_code(finding.library_where or finding.library_file)}:"]
        lines += _block(finding.library_code) if finding.library_code else []
    if finding.advice and finding.advice in shown:
        lines += ["", f"  Advice: the same as under `{shown[finding.advice]}` above."]
    elif finding.advice:
        shown[finding.advice] = finding.stage
        lines += ["", f"  Advice: {plain(finding.advice)}"]
    if finding.rewrite and finding.rewrite in shown:
        lines += ["", f"  Rewrite: the same as under `{shown[finding.rewrite]}` above."]
    elif finding.rewrite:
        shown[finding.rewrite] = finding.stage
        lines += ["", "  Rewrite:", "", *_block(finding.rewrite)]
    return lines


def _stage_section(stage: StageResult, shown: dict[str, str]) -> list[str]:
    lines = [f"### {SYMBOL[stage.status]} `{stage.name}`: {stage.status.value}", ""]
    if stage.reason:
        lines += [f"> {plain(stage.reason)}", ""]
    if not stage.findings:
        lines.append("- [ ] find out why: no finding points into your code; the reason above and the "
                     "error in the JSON report are what there is")
    for finding in stage.findings:
        lines += _item(finding, shown)
    if stage.recipes:
        lines += ["", "Recipes tried, each on a pristine model:", "", *(f"- {plain(one)}" for one in stage.recipes)]
    return lines + [""]


def _tightest(leaf: LeafComparison) -> str:
    """The smallest atol (at the leaf's rtol) and rtol (at its atol) that pass, each where it was measured."""
    if leaf.atol is None:
        return "exact" if leaf.ok else "none: the values must be equal"
    needed = [f"{name} {value:.1e}" + (f" (at {other} {fixed:g})" if fixed is not None else "")
              for name, value, other, fixed in
              (("atol", leaf.required_atol, "rtol", leaf.rtol), ("rtol", leaf.required_rtol, "atol", leaf.atol))
              if value is not None]
    return " or ".join(needed) or "none: NaN/Inf differ"


def _numerics(report: Report) -> list[str]:
    rows = []
    for stage in report.stages:
        worst = {}
        for one in stage.input_sets:
            for leaf in one.leaves:
                if leaf.max_abs_error is not None and (
                        leaf.output not in worst or leaf.max_abs_error > worst[leaf.output].max_abs_error):
                    worst[leaf.output] = leaf
        for name, leaf in worst.items():
            ok = all(other.ok for one in stage.input_sets for other in one.leaves if other.output == name)
            held = "✅ held" if ok else "❌ broken"
            if (leaf.fp64_verdict or "").startswith("within-noise"):
                held += " (within fp64-adjudicated noise)"
            if ok and stage.status is not Status.PASS:  # the verdict's cause lies past the input sets' values
                held += f" on the input sets; the verdict is {stage.status.value}: {plain(stage.reason)}"
            rows.append(f"| `{stage.name}` | {_code(name, cell=True)} | {_number(leaf.max_abs_error)} | "
                        f"{_number(leaf.max_rel_error)} | {_tolerance(leaf.atol)} | {_tolerance(leaf.rtol)} | {held} | "
                        f"{_tightest(leaf)} |")
    if not rows:
        return ["No stage produced outputs to compare.", ""]
    return ["Worst case over the input sets, per output. A tolerance holds when "
            "|stage − eager| ≤ atol + rtol·|eager| everywhere.", "",
            "| stage | output | max abs error | max rel error | atol | rtol | tolerance | tightest that passes |",
            "|---|---|---:|---:|---:|---:|---|---|", *rows, ""]


def _precision(report: Report) -> list[str]:
    judged = [stage for stage in report.stages if stage.precision]
    if not judged:
        return []
    dtype = judged[0].precision.dtype
    rows = [f"| `{s.name}` | {_number(s.precision.fp64_error)} | {_number(s.precision.eager_fp64_error)} | "
            f"{_number(s.precision.allowed)} | {_number(s.precision.float32_error)} | {plain(s.precision.upcast)} |"
            for s in judged]
    return ["## Precision", "",
            f"Judged in {dtype} against a float64 run of the model as cast: a stage holds where its RMS error to "
            f"it is at most 2 × eager {dtype}'s + atol/10; the last number is how far it moved from the float32 "
            "answers.", "",
            f"| stage | rms error to float64 | eager {dtype}'s | allowed | from float32 | computed in float32 |",
            "|---|---:|---:|---:|---:|---|", *rows, ""]


def _speed(report: Report) -> list[str]:
    timings = [t for stage in report.stages for t in stage.timings]
    levels = [level for stage in report.stages if stage.load for level in stage.load.levels]
    if not timings and not levels:
        return []
    rows = [f"| `{t.label}` | {t.input_set + 1} | {t.p50_ms:.3f} | {t.p95_ms:.3f} | "
            f"{f'{t.throughput:,.0f}' if t.throughput else ''} | "
            f"{f'{t.speedup_vs_eager:.2f}x' if t.speedup_vs_eager else ''} |" for t in timings]
    lines = ["## Deployment speed", ""]
    if rows:
        lines += ["| artifact | input set | p50 ms | p95 ms | samples/s | vs eager |", "|---|---:|---:|---:|---:|---:|",
                  *rows, ""]
    for backend in dict.fromkeys(level.backend for level in levels):
        lines += [f"Served under concurrency: {plain(backend)}", "",
                  "| protocol | concurrency | requests | requests/s | samples/s | p50 ms | p99 ms |",
                  "|---|---:|---:|---:|---:|---:|---:|"]
        lines += [f"| {level.protocol} | {level.concurrency} | {level.requests} | {level.throughput:,.1f} | "
                  f"{level.samples_per_second:,.1f} | {level.p50_ms:.2f} | {level.p99_ms:.2f} |"
                  for level in levels if level.backend == backend]
        lines.append("")
    return lines


def _environment(report: Report) -> list[str]:
    lines = [f"- {key}: {_code(value)}" for key, value in report.environment.items()
             if key != "executable" and not key.startswith("env:")]
    variables = [_code(f"{key[4:]}={value}") for key, value in report.environment.items() if key.startswith("env:")]
    if variables:
        lines.append(f"- environment variables: {', '.join(variables)}")
    if report.command:
        lines.append(f"- command: {_code(' '.join(report.command))}")
    return lines + [""]


ROUTE_SYMBOL = {RouteStatus.WORKS: "✅", RouteStatus.WARNS: "⚠️", RouteStatus.BLOCKED: "❌", RouteStatus.UNCHECKED: "⏭️"}


def _tolerance(value: float | None) -> str:
    return "exact" if value is None else f"{value:g}"  # integers, bools and Python numbers must be equal


def _routes(report: Report) -> list[str]:
    from compatcheck.report.routes import summarize

    routes = report.routes or summarize(report)  # a report assembled by hand, or by an older version
    return ["**Routes:**", "", *(f"- {ROUTE_SYMBOL[r.status]} {r.name}: {plain(r.summary)}" for r in routes), ""]


def checklist(report: Report) -> str:
    model = _code(report.model.path) if report.model else "(model not loaded)"
    lines = [f"# Deployment checklist: {model}", "", *_routes(report), _ladder(report), ""]
    blocked = [s for s in report.stages if s.status not in (Status.PASS, Status.SKIP)]
    noted = [s for s in report.stages if s.status in (Status.PASS, Status.SKIP) and s.findings]
    skipped = [s for s in report.stages if s.status is Status.SKIP and not s.findings]
    lines += ["| stage | verdict | max abs error | max rel error | seconds | note |", "|---|---|---:|---:|---:|---|"]
    for stage in report.stages:
        lines.append(f"| `{stage.name}` | {SYMBOL[stage.status]} {stage.status.value} | "
                     f"{_number(shown_error(stage, stage.max_abs_error))} | "
                     f"{_number(shown_error(stage, stage.max_rel_error))} | {stage.seconds:.1f} | "
                     f"{plain(stage.reason)} |")
    lines.append("")
    swept = report.swept_summary()
    if swept:
        lines += [plain(swept[0].upper() + swept[1:]) + ".", ""]
    shown: dict[str, str] = {}
    if blocked:
        count = sum(max(len(s.findings), 1) for s in blocked)
        lines += [f"## To do: {count} item{'s' * (count != 1)} in {len(blocked)} blocked "
                  f"stage{'s' * (len(blocked) != 1)}", ""]
        for stage in blocked:
            lines += _stage_section(stage, shown)
    else:
        lines += ["## To do", "", "Nothing blocks a stage that ran.", ""]
    if noted:
        lines += ["## Worth a look in passing stages", ""]
        for stage in noted:
            lines += _stage_section(stage, shown)
    if skipped:
        lines += ["## Not run", ""]
        lines += [f"- `{s.name}`: {plain(s.reason) or 'skipped'}" for s in skipped]
        lines.append("")
    lines += ["## Numerics", "", *_numerics(report), *_precision(report), *_speed(report), "## Environment", "",
              *_environment(report)]
    return "\n".join(lines)
