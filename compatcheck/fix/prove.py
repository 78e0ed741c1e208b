"""Each candidate rewrite run through the ladder again, on a copy of the model file loaded as if it were the
file, held to the original's answers; the proven ones then together. What every run showed decides the
rewrite's status, by the rules of `judged`."""

from __future__ import annotations

import shutil
import tempfile
import time
from pathlib import Path

from compatcheck.fix.candidates import Candidate, candidates
from compatcheck.fix.text import changed_statements, combined, unified
from compatcheck.report.model import Finding, Report, Rewrite, RewriteStatus, Status


def fix(request, execute, source: str, shown: str) -> tuple[Report, str | None]:
    """Run the model (`execute(request)`, the plain run), then each rewrite its findings' codemods make of
    `source`, then the proven ones together; the report gains `rewrites` and a proven-rewrite finding per
    proven rewrite. Returns it and the file to offer: the proven rewrites together where that is proven,
    else the first proven one, else None. `shown` is the model file as the diffs name it. An interrupt
    keeps the rewrites judged so far and marks the report interrupted."""
    report = execute(request)
    found = candidates(report, request.model, source, request.chosen.rewrites)
    if not found or report.interrupted:
        return report, None
    folder = Path(tempfile.mkdtemp(prefix="compatcheck-fix-"))
    try:
        tried = []
        for n, candidate in enumerate(found):
            one = _tried(request, execute, report, source, shown, candidate, folder / str(n))
            if one is None:
                report.interrupted = True
                break
            tried.append(one)
        proven = [(candidate, one) for candidate, one in zip(found, tried) if one.status is RewriteStatus.PROVEN]
        offered = proven[0][0] if proven else None
        if len(proven) > 1 and not report.interrupted:
            together = _together(request, execute, report, source, shown, [c for c, _ in proven], folder / "all")
            if together[1] is None:
                report.interrupted = True
            else:
                tried.append(together[1])
                offered = together[0] if together[1].status is RewriteStatus.PROVEN else offered
    finally:
        shutil.rmtree(folder, ignore_errors=True)
    report.rewrites = tried
    report.findings += [_finding(candidate, one) for candidate, one in proven]
    return report, offered.text if offered else None


def _tried(request, execute, before: Report, source: str, shown: str, candidate: Candidate,
           folder: Path) -> Rewrite | None:
    """One rewritten copy run through every stage the plain run ran, and judged; None where it was interrupted."""
    folder.mkdir()
    copy = folder / request.model.name
    copy.write_text(candidate.text, encoding="utf-8")
    started = time.monotonic()
    after = execute(type(request)(request.model, request.factory, request.chosen, command=request.command,
                                  rewritten=copy, say=request.say))
    if after.interrupted:
        return None
    status, why, unblocked = judged(before, after, candidate.targets, changed_statements(source, candidate.text))
    return Rewrite(parts=candidate.parts, status=status, why=why, diff=unified(source, candidate.text, shown),
                   unblocked=unblocked, after={stage.name: stage.status for stage in after.stages},
                   seconds=round(time.monotonic() - started, 3))


def _together(request, execute, before: Report, source: str, shown: str, proven: list[Candidate],
              folder: Path) -> tuple[Candidate | None, Rewrite | None]:
    """The proven rewrites made into one file and run once: offered together only if that run proves it too."""
    parts = [part for candidate in proven for part in candidate.parts]
    text = combined(source, [candidate.text for candidate in proven])
    if text is None:
        return None, Rewrite(parts=parts, status=RewriteStatus.REFUTED, diff="",
                             why="they change the same lines: each is offered on its own")
    targets = {stage: finding for candidate in proven for stage, finding in candidate.targets.items()}
    together = Candidate(text, parts, targets)
    return together, _tried(request, execute, before, source, shown, together, folder)


def judged(before: Report, after: Report, targets: dict[str, Finding],
           changed: list[int]) -> tuple[RewriteStatus, str, list[str]]:
    """The rewrite's status, why in one line, and the stages it unblocked: from the plain run, the run of the
    rewritten copy and the original's statements the rewrite changes."""
    was = {stage.name: stage for stage in before.stages}
    now = {stage.name: stage for stage in after.stages}
    eager = now.get("eager")
    if eager is None or eager.status is not Status.PASS:
        said = f"({eager.status.value}): {eager.reason}" if eager else "did not run"
        moved = "eager's answers moved on the rewritten copy" if eager and eager.status is Status.MISMATCH else \
            "the rewritten copy's eager"
        return RewriteStatus.REFUTED, f"{moved} {said}", []
    covered = set(eager.covered or ())
    unrun = [line for line in changed if line not in covered]
    if unrun:
        lines = ", ".join(map(str, unrun))
        return (RewriteStatus.NOT_COVERED, f"it changes line {lines}, which no input set or swept size runs: these "
                "inputs cannot prove it", [])
    worse = [name for name, stage in now.items() if name in was and was[name].status is Status.PASS
             and stage.status is not Status.PASS]
    if worse:
        first = now[worse[0]]
        return RewriteStatus.REFUTED, f"{first.name} passed before and is {first.status.value} now: {first.reason}", []
    better = [name for name, stage in now.items() if name in was and was[name].status is not Status.PASS
              and stage.status is Status.PASS]
    if better:
        return (RewriteStatus.PROVEN, f"{', '.join(better)} pass{'es' if len(better) == 1 else ''} now; eager's "
                "answers held on every input set and swept size", better)
    moved = _moved(targets, now)
    if moved:
        return RewriteStatus.PARTIAL, moved, []
    return RewriteStatus.REFUTED, "nothing improved: every stage has the verdict it had", []


def _moved(targets: dict[str, Finding], now: dict) -> str | None:
    """Where a stage got past the finding the rewrite was for and stopped at another: in words."""
    for name, finding in targets.items():
        stage = now.get(name)
        if stage is None or stage.status is Status.SKIP:
            continue
        blocker = next((one for one in stage.findings if one.kind != "passes-with"), None)
        if blocker is None or (blocker.kind, blocker.line) != (finding.kind, finding.line):
            stopped = blocker.cite() if blocker else stage.reason
            return f"{name} gets past {finding.cite()} and stops at {stopped}"
    return None


def _finding(candidate: Candidate, proven: Rewrite) -> Finding:
    """The proven-rewrite finding: on the first stage the rewrite unblocked, at the line of its finding there."""
    first = proven.unblocked[0]
    target = candidate.targets.get(first) or next(iter(candidate.targets.values()))
    return target.model_copy(update={
        "stage": first, "kind": "proven-rewrite", "rewrite": proven.diff, "advice": None, "op": target.op,
        "message": f"the rewrite of {', '.join(candidate.parts)} is proven: {proven.why}",
        "checked_by": "compatcheck fix: the rewritten copy ran through every stage, held to the original's answers"})
