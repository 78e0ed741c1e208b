"""The short checklist assert_deployable() raises and pytest shows: one block per stage that did not pass."""

from __future__ import annotations

from compatcheck.report.model import StageResult


def failure_text(blocked: list[StageResult], targets) -> str:
    lines = [f"not deployable to {', '.join(targets)}:"]
    for stage in blocked:
        lines.append(f"  {stage.name}: {stage.status.value}" + (f": {stage.reason}" if stage.reason else ""))
        for finding in stage.findings:
            lines.append(f"    {finding.where or '(no line in your code)'}: {finding.kind}: {finding.message}")
            if finding.code:
                lines.append(f"      > {finding.code}")
            if finding.rewrite:
                lines.append("      rewrite:")
                lines.extend(f"        {line}" for line in finding.rewrite.splitlines())
    return "\n".join(lines)
