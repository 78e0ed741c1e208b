"""The merged matrix as Markdown (models x environments), JSON, and JUnit XML for CI systems. Cell files
may come from jobs that are not trusted: their text (notes, versions, errors) is cleaned
(untrusted.clean) and, in Markdown, escaped, so none of it becomes HTML, a table cell or a workflow
command when CI prints matrix.md."""

from __future__ import annotations

import json
import re
import xml.etree.ElementTree as ET
from collections import Counter
from datetime import datetime, timezone

from compatcheck import ladder
from compatcheck.errors import cut
from compatcheck.matrix.baseline import Baseline, Outcome, Verdict, pinned, versions
from compatcheck.matrix.cells import CellResult
from compatcheck.report.markdown import SYMBOL
from compatcheck.report.model import Status
from compatcheck.untrusted import clean

JSON_SCHEMA_VERSION = 1
NOT_RUN = "·"
MARK = {Outcome.NEW_FAILURE: "🔻", Outcome.IMPROVED: "🔺"}
NOTE_LENGTH = 240
_MARKUP = re.compile(r"([<>|])")  # would make HTML or a table cell of the text


def inert(text: str | None) -> str:
    """Text from a cell file on one line, cleaned, with nothing that Markdown makes HTML or a table cell."""
    return _MARKUP.sub(r"\\\1", " ".join(clean(text).split()))


def short(text: str | None) -> str:
    """A note, inert, cut to NOTE_LENGTH."""
    text = inert(text)
    return cut(text, NOTE_LENGTH)


class Grid:
    """The results and verdicts arranged by environment and model, in matrix.yaml's order."""

    def __init__(self, results: list[CellResult], verdicts: list[Verdict], baseline: Baseline):
        self.results = {result.id: result for result in results}
        self.verdicts = verdicts
        self.baseline = baseline
        ordered = sorted(results, key=lambda r: r.order)
        self.environments = list(dict.fromkeys([r.environment for r in ordered] + [v.environment for v in verdicts]))
        self.models = list(dict.fromkeys(
            [r.model for r in sorted(results, key=lambda r: r.order[::-1])] + [v.model for v in verdicts]))
        ran = {stage.name for r in results if r.report for stage in r.report.stages}
        self.stages = [name for name in ladder.NAMES if name in ran]
        self.versions: dict[str, dict[str, str]] = {}
        self.pinned: dict[str, list[str]] = {}
        for result in ordered:
            if result.finished and result.environment not in self.versions:
                self.versions[result.environment] = versions(result)
                self.pinned[result.environment] = pinned(result)
        self.by_stage = {(v.environment, v.model, v.stage): v for v in verdicts}
        self.counts = Counter(v.outcome for v in verdicts)

    def version_text(self, environment: str, names: list[str] | None = None, found: dict | None = None) -> str:
        """'torch 2.14.1': the versions of `names` (default: what the environment pins)."""
        found = self.versions.get(environment, {}) if found is None else found
        names = self.pinned.get(environment, ["torch"]) if names is None else names
        return inert(", ".join(f"{name} {found[name]}" for name in names if name in found)) or "unknown versions"

    def changed(self, environment: str) -> tuple[str | None, str]:
        """The baseline's versions (None if it has none) and this run's, of the packages that differ
        (the pinned ones if none do)."""
        before = self.baseline.environments.get(environment)
        then, now = (before.versions if before else {}), self.versions.get(environment, {})
        names = [name for name in now if name in then and then[name] != now[name]] or None
        return (self.version_text(environment, names, then) if then else None), self.version_text(environment, names)


def markdown(grid: Grid) -> str:
    counts = grid.counts
    lines = ["# compatcheck matrix", "",
             f"**{counts[Outcome.NEW_FAILURE]} new failures**, {counts[Outcome.IMPROVED]} improved, "
             f"{counts[Outcome.XFAIL]} xfail, {counts[Outcome.FAIL]} fail (not in the baseline), "
             f"{counts[Outcome.MISSING]} missing, {counts[Outcome.BROKEN_ENV]} broken-env, "
             f"{counts[Outcome.UNAVAILABLE]} unavailable, {counts[Outcome.PASS]} pass "
             f"({len(grid.environments)} environments x {len(grid.models)} models)", ""]
    lines += _listing(grid, Outcome.BROKEN_ENV, "Broken environments (not judged: fix the environment)")
    lines += _listing(grid, Outcome.NEW_FAILURE, "Regressions")
    lines += _listing(grid, Outcome.IMPROVED, "Improved")
    notes: dict[str, int] = {}

    def footnote(text: str) -> str:
        number = notes.setdefault(short(text), len(notes) + 1)
        return f"[^{number}]"

    header = [f"{env}<br>{grid.version_text(env)}" for env in grid.environments]
    lines += ["| model | " + " | ".join(header) + " |", "|---" * (len(header) + 1) + "|"]
    for model in grid.models:
        row = []
        for env in grid.environments:
            result = grid.results.get(f"{env}/{model}")
            if result is None or not result.finished:
                missing = grid.by_stage.get((env, model, None)) or next(
                    (v for v in grid.verdicts if (v.environment, v.model) == (env, model)), None)
                word = "unavailable" if result is not None and result.unavailable else "missing"
                row.append("—" if missing is None else f"{word}{footnote(missing.note or 'no result')}")
                continue
            statuses = {stage.name: stage for stage in result.report.stages}
            symbols = []
            for name in grid.stages:
                stage = statuses.get(name)
                verdict = grid.by_stage.get((env, model, name))
                if stage is None:
                    symbols.append(NOT_RUN)
                    continue
                symbol = SYMBOL[stage.status]
                if stage.status not in (Status.PASS, Status.SKIP) and verdict and verdict.note:
                    symbol += footnote(f"`{name}`: {verdict.note}")
                symbols.append(symbol + (MARK.get(verdict.outcome, "") if verdict else ""))
            row.append(" ".join(symbols))
        lines.append(f"| {model} | " + " | ".join(row) + " |")
    lines += ["", f"Each cell shows, in order: {' · '.join(f'`{s}`' for s in grid.stages)}. "
              + " ".join(f"{symbol} {status.value}" for status, symbol in SYMBOL.items())
              + f", {NOT_RUN} not run; against the baseline: 🔻 new failure, 🔺 improved.", ""]
    lines += _between(grid)
    lines += [f"[^{number}]: {text}" for text, number in notes.items()]
    return "\n".join(lines).rstrip() + "\n"


def _listing(grid: Grid, outcome: Outcome, title: str) -> list[str]:
    chosen = [v for v in grid.verdicts if v.outcome is outcome]
    if not chosen:
        return []
    lines = [f"## {title}", ""]
    for v in chosen:
        then, now = grid.changed(v.environment)
        expected = v.expected.value if v.expected else "nothing"
        if then is None:
            was = f"{expected} in the baseline, now {v.actual.value} with {now}"
        elif then == now:
            was = f"{expected} in the baseline, now {v.actual.value} on the same {now}"
        else:
            was = f"{expected} with {then} (baseline), now {v.actual.value} with {now}"
        lines.append(f"- **{v.model}** · `{v.stage}` on **{v.environment}**: {was}"
                     + (f": {short(v.note)}" if v.note else ""))
    return lines + [""]


def _between(grid: Grid) -> list[str]:
    """Stages that pass on one environment and not on the next: what an upgrade along the matrix changes."""
    lines = []
    for model in grid.models:
        for before, after in zip(grid.environments, grid.environments[1:]):
            old, new = grid.results.get(f"{before}/{model}"), grid.results.get(f"{after}/{model}")
            if not (old and new and old.finished and new.finished):
                continue
            was = {stage.name: stage.status for stage in old.report.stages}
            for stage in new.report.stages:
                if stage.name not in was or (was[stage.name] is Status.PASS) == (stage.status is Status.PASS):
                    continue
                breaks = was[stage.name] is Status.PASS
                verdict = grid.by_stage.get((after if breaks else before, model, stage.name))  # the failing side
                word = "breaks" if breaks else "starts passing"
                lines.append(f"- **{model}** · `{stage.name}` {word} from {before} ({grid.version_text(before)}, "
                             f"{was[stage.name].value}) to {after} ({grid.version_text(after)}, {stage.status.value})"
                             + (f": {short(verdict.note)}" if verdict and verdict.note else ""))
    return (["## Between environments", ""] + lines + [""]) if lines else []


def to_json(grid: Grid, exit_code: int) -> str:
    return json.dumps({
        "schema_version": JSON_SCHEMA_VERSION,
        "created": datetime.now(timezone.utc).isoformat(timespec="seconds"),
        "exit_code": exit_code,
        "summary": {outcome.value: grid.counts[outcome] for outcome in Outcome},
        "environments": [{"name": env, "versions": grid.versions.get(env, {})} for env in grid.environments],
        "models": grid.models,
        "stages": grid.stages,
        "cells": [{"environment": r.environment, "model": r.model, "seconds": r.seconds, "error": r.error,
                   "stages": {s.name: s.status.value for s in r.report.stages} if r.report else {}}
                  for r in sorted(grid.results.values(), key=lambda r: r.order)],
        "verdicts": [{"environment": v.environment, "model": v.model, "stage": v.stage, "outcome": v.outcome.value,
                      "expected": v.expected.value if v.expected else None,
                      "actual": v.actual.value if v.actual else None, "note": v.note,
                      "finding": v.finding.model_dump() if v.finding else None} for v in grid.verdicts],
    }, indent=2) + "\n"


def junit(grid: Grid, strict: bool) -> str:
    """One test case per cell x stage; only what fails the gate is a <failure> (or an <error>)."""
    suites = ET.Element("testsuites", name="compatcheck matrix")
    for env in grid.environments:
        mine = [v for v in grid.verdicts if v.environment == env]
        suite = ET.SubElement(suites, "testsuite", name=env, tests=str(len(mine)))
        tally = Counter()
        for v in mine:
            result = grid.results.get(f"{env}/{v.model}")
            ran = result.report.stages if result and result.report else []
            stage = next((s for s in ran if s.name == v.stage), None)
            case = ET.SubElement(suite, "testcase", classname=f"{env}.{v.model}", name=v.stage or "(cell)",
                                 time=f"{stage.seconds:.3f}" if stage else "0")
            said = (f"expected {v.expected.value}" if v.expected else "not in the baseline") + (
                f", got {v.actual.value}" if v.actual else ", no result")
            note = clean(v.note, lines=True) if v.note else None
            if v.outcome is Outcome.NEW_FAILURE:
                ET.SubElement(case, "failure", message=f"new-failure: {said}", type="new-failure").text = note
                tally["failures"] += 1
            elif v.outcome is Outcome.BROKEN_ENV:
                ET.SubElement(case, "error", message=f"broken-env: {clean(v.note)}", type="broken-env")
                tally["errors"] += 1
            elif v.outcome is Outcome.MISSING and strict:
                ET.SubElement(case, "error", message=f"missing: {clean(v.note or said)}", type="missing")
                tally["errors"] += 1
            elif v.outcome in (Outcome.XFAIL, Outcome.FAIL, Outcome.MISSING, Outcome.UNAVAILABLE) \
                    or v.actual is Status.SKIP:
                ET.SubElement(case, "skipped", message=f"{v.outcome.value}: {said}").text = note
                tally["skipped"] += 1
            elif v.outcome is Outcome.IMPROVED:
                ET.SubElement(case, "system-out").text = f"improved: {said}; update the baseline"
        for name in ("failures", "errors", "skipped"):
            suite.set(name, str(tally[name]))
    ET.indent(suites)
    return '<?xml version="1.0" encoding="utf-8"?>\n' + ET.tostring(suites, encoding="unicode") + "\n"
