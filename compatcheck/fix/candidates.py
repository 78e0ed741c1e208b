"""The rewrites `compatcheck fix` can try: each finding on the model file's own lines whose catalog entry
names a codemod that fits the line, one per distinct rewritten file."""

from __future__ import annotations

from dataclasses import dataclass, field
from pathlib import Path

from compatcheck.codemods import rewrite
from compatcheck.diagnose.catalog import load
from compatcheck.report.model import Finding, Report


@dataclass
class Candidate:
    text: str  # the whole model file, rewritten
    parts: list[str] = field(default_factory=list)  # 'catalog-id at file:line, line', per entry it is for
    targets: dict[str, Finding] = field(default_factory=dict)  # stage -> the finding of that stage it is for


def candidates(report: Report, model: Path, source: str, rewrites: Path | None) -> list[Candidate]:
    """What the codemods of the findings' catalog entries make of `source` (the model file's text), in the
    order of the findings; findings that a codemod rewrites the same way share one candidate."""
    catalog = load(str(rewrites) if rewrites else None)
    found: dict[str, Candidate] = {}
    lines: dict[str, dict[str, set[int]]] = {}  # rewritten text -> catalog id -> the lines of its findings
    for finding in report.findings:
        if finding.file != model.name or not finding.line or finding.library_file:
            continue  # only the model file's own lines are ever rewritten
        entry = catalog.match(finding)
        text = rewrite(entry.codemod, source, finding.line) if entry is not None and entry.codemod else None
        if text is None:
            continue
        found.setdefault(text, Candidate(text)).targets.setdefault(finding.stage, finding)
        lines.setdefault(text, {}).setdefault(entry.id, set()).add(finding.line)
    for text, candidate in found.items():
        candidate.parts = [f"{name} at {model.name}:{', '.join(map(str, sorted(at)))}" for name, at in lines[text].items()]
    return list(found.values())


def offer(report: Report, model: Path, rewrites: Path | None) -> str | None:
    """One line for `compatcheck run`: what `compatcheck fix` would rewrite, where a codemod fits a finding."""
    from compatcheck.files import MAX_SOURCE_BYTES, read_bounded

    if not any(finding.file == model.name for finding in report.findings):
        return None
    try:
        source = read_bounded(model, MAX_SOURCE_BYTES).decode()
    except (OSError, ValueError):
        return None
    found = candidates(report, model, source, rewrites)
    if not found:
        return None
    parts = "; ".join(part for candidate in found for part in candidate.parts)
    return (f"fix: `compatcheck fix` can rewrite {parts}, and offers what running every stage again on the "
            "rewrite proves")
