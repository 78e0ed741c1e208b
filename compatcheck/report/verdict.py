"""A stage's verdict: evidence in, status and reason out, by one ordered table of rules.

The worker gathers the evidence as the stage's phases run (worker/phases.py); the supervisor adds
what it saw itself (a crash, a kill) and asks again. This is the only module that gives a
StageResult its status and reason; tests/test_verdict.py holds the package to that.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Callable

from pydantic import BaseModel, Field

from compatcheck.report.model import InputSetResult, PhaseRecord, StageResult, Status

# The phases whose outcome is evidence for the verdict: they run the artifact. Phases after them
# (diagnosis, the meta run, recipes) only add findings and notes.
JUDGED = ("build", "sweep", "load", "timing")


class Evidence(BaseModel):
    """What running one stage showed, as the verdict reads it."""

    reference: bool = Field(False, description="the stage is the reference (eager)")
    skipped: str | None = Field(None, description="why the stage could not run")
    ended: str | None = Field(None, description="'crash' or 'timeout': the supervisor saw the worker die or killed "
                                                "it before a verdict")
    ended_why: str | None = None
    error: str | None = Field(None, description="what building or running the artifact raised, in one line")
    environment: str | None = Field(None, description="a fault of the environment behind the failure (a library's "
                                                      "failed import, a compile backend that breaks torch's guard code where "
                                                      "backend='eager' compiles the model): "
                                                      "what, and the fix")
    runs_nothing: bool = Field(False, description="the stage builds something that only the next stage runs")
    input_sets: list[InputSetResult] = []
    swept: list[InputSetResult] = []
    load_problem: str | None = Field(None, description="the first answer that changed under load")
    within_noise: bool = Field(False, description="an output passed only by the fp64 adjudication")
    precision: str | None = Field(None, description="with --dtype, the pass's precision record in words")
    not_compared: str | None = Field(None, description="which outputs were compared, for a model that varies by "
                                                       "design")
    note: str | None = Field(None, description="the stage's note on a pass")
    copy_problem: str | None = Field(None, description="what went wrong copying the model for this stage")
    internal: str | None = Field(None, description="what compatcheck's own code raised, in one line: no verdict "
                                                   "on the model")
    phases: list[PhaseRecord] = []
    recompiles: list[str] = Field([], description="swept sizes the stage did not run because torch.compile would "
                                                  "compile again for them, each with dynamo's reason")


@dataclass(frozen=True)
class Rule:
    name: str
    says: str  # the rule in words, for the docs page
    applies: Callable[[Evidence], bool]
    status: Status
    reason: Callable[[Evidence], str | None]


def problem(one: InputSetResult) -> str | None:
    """What went wrong on one input set, most telling first: what the artifact raised, a structure it
    could not be compared in, the first output off; a structure note only where nothing else is."""
    if one.error:
        return one.error
    if not one.ok and not one.leaves:
        return one.structure
    bad = next((leaf for leaf in one.leaves if not leaf.ok), None)
    if bad is not None:
        return f"output {bad.output}: {bad.problem}"
    return one.structure if not one.ok else None


def _first_problem(e: Evidence) -> str | None:
    for one in e.input_sets:
        said = problem(one)
        if said:
            return f"input set {one.index + 1}{':' if not said.startswith('output ') else ','} {said}"
    return None


def _broken_size(e: Evidence) -> InputSetResult | None:
    return next((one for one in e.swept if not one.ok), None)


def _at_size(e: Evidence) -> str:
    broken = _broken_size(e)
    return f"at {broken.label}, which your input sets lack: {problem(broken) or ''}"


def _raised(e: Evidence) -> bool:
    return bool(e.error or any(one.error for one in e.input_sets))


def _ran_out(e: Evidence, outcome: str = "timed-out") -> PhaseRecord | None:
    """A phase that ran the artifact and did not finish (`outcome`): the artifact gave no answer. The
    reference's sweep only makes input sets; one cut short leaves eager's verdict as it is."""
    return next((phase for phase in e.phases if phase.name in JUDGED and phase.outcome == outcome
                 and not (e.reference and phase.name == "sweep")), None)


def _passed(e: Evidence) -> str | None:
    if e.runs_nothing:
        return "built and checked; nothing here to run it with, the next stage runs it"
    if e.not_compared:
        return e.not_compared
    if e.precision:
        return e.precision
    return "differences from eager are within fp64-adjudicated noise" if e.within_noise else None


RULES: tuple[Rule, ...] = (
    Rule("skipped", "it could not run here (a stage it needs did not pass, a package is missing)",
         lambda e: bool(e.skipped), Status.SKIP, lambda e: e.skipped),
    Rule("internal error", "compatcheck's own code raised (a bug of compatcheck): no verdict on the model",
         lambda e: bool(e.internal), Status.INTERNAL, lambda e: f"internal error of compatcheck: {e.internal}"),
    Rule("crashed", "the worker died before a verdict", lambda e: e.ended == "crash", Status.CRASH,
         lambda e: e.ended_why),
    Rule("killed", "the build or a run outlived --timeout and the worker was killed", lambda e: e.ended == "timeout",
         Status.TIMEOUT, lambda e: e.ended_why),
    Rule("broken environment", "it raised for a reason no model gets past (a library could not import what it needs, a compile backend breaks torch's guard code where backend='eager' compiles the model): no verdict on the model",
         lambda e: _raised(e) and bool(e.environment), Status.BROKEN_ENV,
         lambda e: f"broken environment: {e.environment}"),
    Rule("build raised", "building or running the artifact raised", lambda e: bool(e.error), Status.FAIL,
         lambda e: e.error),
    Rule("input set raised", "the artifact raised on an input set", lambda e: _raised(e), Status.FAIL, _first_problem),
    Rule("input set differs", "an output of an input set is not eager's, element by element (the comparison rules)",
         lambda e: not all(one.ok for one in e.input_sets), Status.MISMATCH, _first_problem),
    Rule("swept size raised", "the artifact raised at a swept size eager runs at",
         lambda e: bool(_broken_size(e) and _broken_size(e).error), Status.FAIL, _at_size),
    Rule("swept size differs", "the artifact differs from eager at a swept size", lambda e: bool(_broken_size(e)),
         Status.MISMATCH, _at_size),
    Rule("ran out", "the sweep, the load run or the timing gave no answer within its budget",
         lambda e: _ran_out(e) is not None, Status.TIMEOUT, lambda e: _ran_out(e).note),
    Rule("died running", "the worker died during the sweep, the load run or the timing",
         lambda e: _ran_out(e, "crashed") is not None, Status.CRASH, lambda e: _ran_out(e, "crashed").note),
    Rule("changed under load", "an answer changed when requests were batched together",
         lambda e: bool(e.load_problem), Status.MISMATCH, lambda e: e.load_problem),
    Rule("pass", "everything it ran answered as eager does", lambda e: True, Status.PASS, _passed),
)


def _addenda(e: Evidence, status: Status) -> tuple[list[str], list[str]]:
    """What a reason gains beyond its rule: the stage's note on a pass and the model copy's trouble,
    then, in parentheses, each later phase that did not run to its end."""
    if status in (Status.SKIP, Status.CRASH, Status.BROKEN_ENV, Status.INTERNAL) or e.ended:
        return [], []
    said = [e.note] if status is Status.PASS and e.note else []
    if e.copy_problem:
        said.append(f"the model's copy for this stage: {e.copy_problem}")
    short = [phase.note for phase in e.phases if phase.name not in JUDGED and phase.outcome != "ran" and phase.note]
    return said, short


def judge(e: Evidence) -> tuple[Status, str | None]:
    """The status and reason the evidence makes: the first rule that applies, and its addenda."""
    rule = next(rule for rule in RULES if rule.applies(e))
    said, short = _addenda(e, rule.status)
    reason = "; ".join(filter(None, [rule.reason(e), *said])) + "".join(f" ({note})" for note in short)
    return rule.status, reason.strip() or None


def result(name: str, evidence: Evidence, **fields) -> StageResult:
    """The stage's result: its evidence judged, with the report's other fields."""
    status, reason = judge(evidence)
    return StageResult(name=name, status=status, reason=reason, input_sets=evidence.input_sets,
                       swept=evidence.swept, phases=evidence.phases, recompiles=evidence.recompiles, **fields)


def rejudged(stage: StageResult, evidence: Evidence) -> StageResult:
    """`stage` with what `evidence` now says (a phase the supervisor killed added to it)."""
    status, reason = judge(evidence)
    return stage.model_copy(update={"status": status, "reason": reason, "phases": list(evidence.phases)})
