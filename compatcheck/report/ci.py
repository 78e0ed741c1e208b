"""What CI systems read without glue: JUnit XML (one test case per stage) and GitHub Actions
annotations (each finding on the user's line in the pull request). The model's text in either goes
through untrusted.clean: no character XML 1.0 forbids (one makes the whole file unreadable), no escape
sequence or bidi override in the runner's log."""

from __future__ import annotations

import xml.etree.ElementTree as ET
from pathlib import Path

from compatcheck.report.model import FAILING, Finding, Report, StageResult, Status
from compatcheck.untrusted import clean


def _finding_text(finding: Finding) -> str:
    lines = [f"{finding.where or '(no line in your code)'}: {finding.kind}: {finding.message}"]
    if finding.code:
        lines.append(f"  > {finding.code}")
    if finding.rewrite:
        lines += ["  rewrite:", *(f"    {line}" for line in finding.rewrite.splitlines())]
    return "\n".join(lines)


def _stage_text(stage: StageResult) -> str:
    parts = [_finding_text(finding) for finding in stage.findings]
    if stage.error and not stage.findings:
        parts.append(stage.error)
    return "\n\n".join(parts)


def junit(report: Report) -> str:
    """One test case per stage: a <failure> for mismatch, fail, crash and timeout with the findings
    as its text, <skipped> with the reason, findings of a passing stage in its <system-out>."""
    name = clean(Path(report.model.path).stem) if report.model else "model"
    counts = {status: sum(stage.status is status for stage in report.stages) for status in Status}
    suite = ET.Element("testsuite", name=f"compatcheck {name}", tests=str(len(report.stages)),
                       failures=str(sum(counts[s] for s in FAILING)), errors="0", skipped=str(counts[Status.SKIP]),
                       time=f"{report.seconds:.3f}")
    for stage in report.stages:
        case = ET.SubElement(suite, "testcase", classname=f"compatcheck.{name}", name=stage.name,
                             time=f"{stage.seconds:.3f}")
        summary = clean(stage.status.value + (f": {stage.reason}" if stage.reason else ""))
        if stage.status in FAILING:
            ET.SubElement(case, "failure", message=summary, type=stage.status.value).text = clean(
                _stage_text(stage), lines=True)
        elif stage.status is Status.SKIP:
            ET.SubElement(case, "skipped", message=summary)
        elif stage.findings:
            ET.SubElement(case, "system-out").text = clean(_stage_text(stage), lines=True)
    ET.indent(suite)
    return '<?xml version="1.0" encoding="utf-8"?>\n' + ET.tostring(suite, encoding="unicode") + "\n"


def _escape(text: str, property: bool = False) -> str:
    """GitHub workflow command escaping, of cleaned text: data keeps newlines as %0A; properties also
    escape : and ,."""
    text = clean(text, lines=not property).replace("%", "%25").replace("\r", "%0D").replace("\n", "%0A")
    return text.replace(":", "%3A").replace(",", "%2C") if property else text


def _workspace_path(report: Report, file: str) -> str:
    """A finding's file (relative to the model's folder) relative to the current folder, as the
    checkout root a workflow runs in; GitHub places annotations by that path."""
    path = Path(file)
    if not path.is_absolute() and report.model:
        path = Path(report.model.path).parent / path
    try:
        return str(path.resolve().relative_to(Path.cwd()))
    except ValueError:
        return str(path)


def github_annotations(report: Report) -> list[str]:
    """`::error` for each finding of a stage that did not pass (or the stage itself when it has
    none), `::warning` for findings of stages that passed."""
    lines = []
    for stage in report.stages:
        failing = stage.status in FAILING
        if failing and not stage.findings:
            title = f"compatcheck {stage.name}: {stage.status.value}"
            lines.append(f"::error title={_escape(title, True)}::{_escape(stage.reason or stage.status.value)}")
        for finding in stage.findings:
            level = "error" if failing else "warning"
            properties = []
            if finding.file:
                properties.append(f"file={_escape(_workspace_path(report, finding.file), True)}")
                if finding.line:
                    properties.append(f"line={finding.line}")
            properties.append(f"title={_escape(f'compatcheck {stage.name}: {finding.kind}', True)}")
            message = finding.message + (f"\nrewrite:\n{finding.rewrite}" if finding.rewrite else "")
            lines.append(f"::{level} {','.join(properties)}::{_escape(message)}")
    return lines
