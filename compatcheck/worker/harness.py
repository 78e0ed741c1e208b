"""Run one stage in the worker: its phases in order (worker/phases.py), each gathering evidence or
findings; the verdict is report/verdict.py's, from that evidence alone.

Everything here is the same for every stage; stages only build runners and read their evidence.
"""

from __future__ import annotations

import sys
import time
import traceback
from contextlib import contextmanager, nullcontext

from compatcheck.deadline import within
from compatcheck.errors import InternalError, UsageError, chain, one_line
from compatcheck.ladder import BY_NAME
from compatcheck.report import verdict
from compatcheck.report.model import PhaseRecord, StageResult, Status
from compatcheck.report.verdict import JUDGED, Evidence
from compatcheck.stages.base import Stage, StageContext
from compatcheck.worker.guards import guarded
from compatcheck.worker import phases
from compatcheck.worker.phases import KILL_GRACE_S, Phase
from compatcheck.worker.precision import precision, precision_reason
from compatcheck.worker.runs import MODEL_ERRORS, not_compared
from compatcheck.worker.skips import skip_reason

MAX_ERROR_TEXT = 20_000


def run_stage(stage: Stage, ctx: StageContext, judged=lambda result, evidence: None) -> StageResult:
    """The stage's result; `judged(result, evidence)` hears the verdict as soon as the phases that run
    the artifact are done, and again after each phase after them, so a kill keeps what they found."""
    reason = skip_reason(stage, ctx)
    if reason:
        return verdict.result(stage.name, Evidence(skipped=reason))
    run = StageRun(stage, ctx)
    for phase in phases.PHASES:
        if phase.name not in JUDGED and not run.settled:
            run.settle()
            judged(run.result(), run.evidence)
        if phase.applies(run):
            run_phase(phase, run)
            if run.settled:
                judged(run.result(), run.evidence)
    _release(run.error, *run.raised)
    return run.result()


def run_phase(phase: Phase, run: "StageRun") -> None:
    """Run one phase within its budget, and record what it did with it."""
    budget = phase.seconds(run)
    run.step(phase.doing, phase=phase.name, kill_after=budget + (KILL_GRACE_S if phase.stoppable else 0))
    started = time.perf_counter()
    said = None
    with guarded(run.ctx.warnings), (within(budget) if phase.stoppable else nullcontext()) as timer:
        try:
            said = phase.run(run)
        except UsageError:
            raise  # the model file's fault, not the stage's: the run stops with it
        except Exception as exc:  # compatcheck's own code; the model's errors are evidence, caught in the phase
            said = ("failed", _internal(phase, run, exc))
    seconds = round(time.perf_counter() - started, 3)
    if phase.closes:
        run.stage.close()
    if timer is not None and timer.expired:
        where = f", {run.doing}" if run.doing != phase.doing else ""
        said = ("timed-out", f"{phase.title} was cut short: it did not end within its {budget:.1f}s "
                             f"({phase.budget}){where}; {phase.lost}")
    outcome, note = said or ("ran", None)
    run.evidence.phases.append(PhaseRecord(name=phase.name, outcome=outcome, seconds=seconds,
                                           budget=round(budget, 3), note=note))
    if phase.name in JUDGED and not (run.evidence.reference and phase.name == "sweep"):  # that has its own seconds
        run.seconds += seconds


def _internal(phase: Phase, run: "StageRun", exc: Exception) -> str:
    """A phase's own code raised: a bug of compatcheck, with its traceback in the worker's log. In a
    phase that runs the artifact it leaves the stage without a verdict, never a pass."""
    said = f"{phase.name} failed, an internal error of compatcheck: {one_line(exc)}"
    sys.stderr.write(f"internal error of compatcheck in {run.stage.name}, {phase.name}:\n"
                     + "".join(traceback.format_exception(exc)))
    if phase.name in JUDGED:
        run.evidence.internal = run.evidence.internal or f"{phase.title} raised {one_line(exc)}"
    return said


class StageRun:
    """One stage's run in the worker: the evidence its phases gather and the report's other fields."""

    def __init__(self, stage: Stage, ctx: StageContext):
        self.stage, self.ctx = stage, ctx
        ctx.spec.fresh_model()  # what earlier stages did to their copies is not this stage's concern
        copy = ctx.spec.pristine.problem if ctx.spec.pristine else None
        self.evidence = Evidence(reference=BY_NAME[stage.name].reference, copy_problem=copy)
        self.runner = None
        self.error: BaseException | None = None
        self.raised: list[BaseException] = []  # what the runner raised, per input set that failed
        self.error_text: str | None = None
        self.findings, self.recipes, self.timings = [], [], []
        self.load = self.sweep = self.precision = self.backend = None
        self.seconds = 0.0  # the phases that ran the artifact
        self.settled = False
        self.doing = ""
        ctx.warnings, ctx.input_results = [], self.evidence.input_sets
        ctx.runner, ctx.flat_outputs = None, stage.flat_outputs
        self._send = ctx.step

    def step(self, what: str, **phase) -> None:
        self.doing = what
        self._send(what, **phase)

    @contextmanager
    def judging(self):
        """Around a phase that runs the model's code: what it raises is evidence (a fail)."""
        try:
            yield
        except (UsageError, InternalError):  # the model file's fault; compatcheck's own (the comparison's)
            raise
        except MODEL_ERRORS as exc:
            self.error = exc
            self.evidence.error = one_line(exc)
            self.error_text = "".join(traceback.format_exception(exc))[-MAX_ERROR_TEXT:]

    @property
    def status(self) -> Status:
        return verdict.judge(self.evidence)[0]

    def note(self, said: str | None) -> None:
        self.evidence.note = "; ".join(filter(None, [self.evidence.note, said])) or None

    def settle(self) -> None:
        """The evidence the input sets' results make, once the phases that run the artifact are done."""
        ctx, evidence, self.settled = self.ctx, self.evidence, True
        ctx.stage_seconds = self.seconds
        self.backend = self.stage.backend(ctx)
        leaves = [leaf for one in evidence.input_sets for leaf in one.leaves]
        if self.error is None:
            self.error_text = next((one.error for one in evidence.input_sets if one.error), None)
            evidence.within_noise = any((leaf.fp64_verdict or "").startswith("within-noise") for leaf in leaves)
            if ctx.reduced and leaves:
                self.precision = precision(ctx, self.stage, leaves)
                evidence.precision = precision_reason(self.precision)
            if evidence.input_sets and ctx.varies:
                evidence.not_compared = not_compared(ctx, self.stage)
        evidence.environment = self.stage.environment(ctx, self.error or (self.raised[0] if self.raised else None))

    def result(self) -> StageResult:
        leaves = [leaf for one in self.evidence.input_sets for leaf in one.leaves] if self.error is None else []
        errors = {name: [getattr(leaf, f"max_{name}_error") for leaf in leaves
                         if getattr(leaf, f"max_{name}_error") is not None] for name in ("abs", "rel")}
        return verdict.result(
            self.stage.name, self.evidence.model_copy(deep=True), seconds=round(self.seconds, 3),
            error=self.error_text, call=self.stage.call_ran.source() if self.stage.call_ran else None,
            findings=list(self.findings), recipes=list(self.recipes), timings=self.timings,
            load=self.load, sweep=self.sweep, precision=self.precision, backend=self.backend,
            max_abs_error=max(errors["abs"], default=None), max_rel_error=max(errors["rel"], default=None),
            artifacts={k: v for k, v in self.ctx.artifacts.items() if k == self.stage.name},
            covered=sorted(covered.lines) if self.evidence.reference and (covered := self.ctx.spec.covered) else None)


def _release(*errors: BaseException | None) -> None:
    """Drop the locals the stage's exceptions hold through their tracebacks (a model that failed after
    allocating gigabytes), so the stages after it get that memory back."""
    for error in errors:
        for one in chain(error):
            traceback.clear_frames(one.__traceback__)
