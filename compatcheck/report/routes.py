"""Deployment routes: the ladder is really a set of ways to ship a model (torch.compile; TorchScript
by scripting or tracing; torch.export → AOTInductor; ONNX → onnxruntime → Triton). Each route is
summarized from its stages' verdicts when the report is assembled, whichever worker ran them or
whether they came from the cache: works, works with warnings, or blocked at a stage by a finding.

Imports no torch: the command assembles routes in the parent process."""

from __future__ import annotations

from compatcheck import ladder
from compatcheck.report.model import FAILING, Report, Route, RouteStatus, StageResult, Status


def _blocker(stage: StageResult) -> str:
    return stage.findings[0].cite() if stage.findings else (stage.reason or stage.status.value)


def _blocked(stage: StageResult, finding: str) -> str:
    """The summary of a route blocked at `stage`: what blocks it, and the proven recipe that gets past it."""
    proven = next((f.op for f in stage.findings if f.kind == "passes-with" and f.op
                   and not f.message.startswith("not checked")), None)
    said = f"blocked at {stage.name} by {finding}"
    return f"{said}; works with {proven}, checked on every input set" if proven else said


# Stages that say nothing of the route: skipped, or given no verdict by compatcheck's own error.
_UNJUDGED = (Status.SKIP, Status.INTERNAL)


def _route(table: ladder.Route, by_name: dict) -> Route:
    known, optional = list(table.stages), table.optional
    ran = [by_name[n] for n in known if n in by_name and by_name[n].status not in _UNJUDGED]
    route = Route(name=table.name, stages=known, status=RouteStatus.UNCHECKED)
    if not ran:
        route.summary = "not checked: none of its stages ran"
        return route
    required = [s for s in ran if s.name not in optional]
    blocked = next((s for s in required if s.status in FAILING), None)
    if blocked is not None:
        route.status, route.stage = RouteStatus.BLOCKED, blocked.name
        route.finding = _blocker(blocked)
        route.summary = _blocked(blocked, route.finding)
        return route
    if not required:  # only optional stages ran: they speak for the route only when they pass
        failing = next((s for s in ran if s.status in FAILING), None)
        if failing is not None:
            route.status, route.stage, route.finding = RouteStatus.BLOCKED, failing.name, _blocker(failing)
            route.summary = _blocked(failing, route.finding)
            return route
    warnings = [f"{s.name} {s.status.value}: {_blocker(s)}" for s in ran if s.status in FAILING]
    warnings += [f"{s.name}: {s.findings[0].cite()}" for s in ran if s.status is Status.PASS and s.findings]
    unchecked = [n for n in known if n not in by_name or by_name[n].status in _UNJUDGED]
    route.status = RouteStatus.WARNS if warnings else RouteStatus.WORKS
    route.summary = ("works with warnings: " + "; ".join(warnings)) if warnings else "works"
    if unchecked:
        reasons = [f"{n} ({by_name[n].reason})" if n in by_name and by_name[n].reason else n for n in unchecked]
        route.summary += f" (up to {ran[-1].name}; not checked: {', '.join(reasons)})"
    return route


def summarize(report: Report) -> list[Route]:
    by_name = {stage.name: stage for stage in report.stages}
    return [_route(table, by_name) for table in ladder.ROUTES]


_WORKING = "The routes that work here: "


def annotate(report: Report) -> None:
    """Fill in what findings say about other routes, now that every stage's verdict is known (again
    on a resumed report: the earlier note is replaced)."""
    working = [r.name for r in report.routes if r.status in (RouteStatus.WORKS, RouteStatus.WARNS)]
    note = _WORKING + (", ".join(working) if working else "none of those checked") + "."
    for finding in report.findings:
        if finding.kind == "library-not-scriptable":
            before = (finding.advice or "").split(_WORKING)[0].strip()
            finding.advice = f"{before} {note}".strip()
