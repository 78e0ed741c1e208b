"""The short checklist assert_deployable() raises and pytest shows: one block per stage that did not pass,
the model's text in it cleaned (untrusted.clean) as on the terminal."""

from __future__ import annotations

from compatcheck.report.model import StageResult
from compatcheck.untrusted import clean


def failure_text(blocked: list[StageResult], targets) -> str:
    lines = [f"not deployable to {', '.join(targets)}:"]
    for stage in blocked:
        lines.append(f"  {stage.name}: {stage.status.value}" + (f": {clean(stage.reason)}" if stage.reason else ""))
        for finding in stage.findings:
            lines.append(f"    {clean(finding.where or '(no line in your code)')}: {finding.kind}: {clean(finding.message)}")
            if finding.code:
                lines.append(f"      > {clean(finding.code)}")
            if finding.rewrite:
                lines.append("      rewrite:")
                lines.extend(f"        {line}" for line in clean(finding.rewrite, lines=True).splitlines())
    return "\n".join(lines)
