"""The Markdown downgrade checklist: how far the model got, and a box to tick per finding."""

from __future__ import annotations

from compatcheck.report.model import Report, Status

SYMBOL = {
    Status.PASS: "✅", Status.MISMATCH: "⚠️", Status.FAIL: "❌", Status.SKIP: "⏭️",
    Status.CRASH: "💥", Status.TIMEOUT: "⏱️",
}


def _cell(text: str | None) -> str:
    return (text or "").replace("|", "\\|").replace("\n", " ")


def _error(value: float | None) -> str:
    return "" if value is None else f"{value:.2e}"


def checklist(report: Report) -> str:
    model = report.model.path if report.model else "(model not loaded)"
    lines = [f"# Deployment checklist: `{model}`", ""]
    deepest = report.deepest_pass()
    lines.append(f"**Deepest stage reached:** `{deepest}`" if deepest else "**Deepest stage reached:** none")
    blocked = [s for s in report.stages if s.status not in (Status.PASS, Status.SKIP)]
    if blocked:
        lines.append(f"**Blocked:** {', '.join(f'`{s.name}` ({s.status.value})' for s in blocked)}")
    lines += ["", "| stage | verdict | max abs error | max rel error | seconds | note |", "|---|---|---:|---:|---:|---|"]
    for stage in report.stages:
        lines.append(
            f"| `{stage.name}` | {SYMBOL[stage.status]} {stage.status.value} | {_error(stage.max_abs_error)} | "
            f"{_error(stage.max_rel_error)} | {stage.seconds:.1f} | {_cell(stage.reason)} |"
        )
    lines.append("")
    for stage in report.stages:
        if stage.status in (Status.PASS, Status.SKIP) and not stage.findings:
            continue
        lines += [f"## `{stage.name}`: {stage.status.value}", ""]
        if stage.reason and not stage.findings:
            lines += [f"- [ ] {stage.reason}", ""]
        for finding in stage.findings:
            where = f"`{finding.file}:{finding.line}`" if finding.file and finding.line else "(no user line)"
            lines.append(f"- [ ] **{finding.kind}**{f' `{finding.op}`' if finding.op else ''} at {where}: "
                         f"{finding.message}")
            if finding.code:
                lines += ["  ```python", f"  {finding.code}", "  ```"]
            if finding.rewrite:
                lines.append(f"  Rewrite: {finding.rewrite}")
        lines.append("")
    lines += ["## Numerics", "", "| stage | output | max abs error | atol | rtol | tolerance that would pass |",
              "|---|---|---:|---:|---:|---|"]
    for stage in report.stages:
        worst = {}
        for one in stage.input_sets:
            for leaf in one.leaves:
                if leaf.max_abs_error is not None and (
                        leaf.output not in worst or leaf.max_abs_error > worst[leaf.output].max_abs_error):
                    worst[leaf.output] = leaf
        for name, leaf in worst.items():
            need = f"atol {leaf.required_atol:.2e} or rtol {leaf.required_rtol:.2e}" if leaf.required_atol is not None else "none (NaN/Inf differ)"
            lines.append(f"| `{stage.name}` | `{name}` | {_error(leaf.max_abs_error)} | {leaf.atol:g} | {leaf.rtol:g} | {need} |")
    lines += ["", "## Environment", ""]
    lines += [f"- {key}: `{value}`" for key, value in report.environment.items() if key != "executable"]
    lines.append("")
    return "\n".join(lines)
