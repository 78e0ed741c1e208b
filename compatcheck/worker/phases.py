"""The phases of one stage's run, as one table: what each does, its budget, and when it runs.

The first four run the artifact and are the verdict's evidence (report/verdict.py: JUDGED); once
they are done the worker sends the verdict, and the phases after it (diagnosis, the meta run,
recipes) only add findings and notes. Each phase but the build runs under a deadline inside the
worker (deadline.py) and is killed by the supervisor a grace period later, should it block in C;
neither can take a verdict already sent. A new phase is a function and a row of PHASES.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Callable

from compatcheck.errors import one_line
from compatcheck.ladder import REFERENCE
from compatcheck.report.model import Status, SweepInfo
from compatcheck.diagnose.broken_env import broken_environment
from compatcheck.diagnose.errors import artifact_error
from compatcheck.diagnose.mismatch import mismatch_findings
from compatcheck.diagnose.quantized import quantized_findings
from compatcheck.diagnose.sandbox import sandbox_findings
from compatcheck.diagnose.state import froze_findings
from compatcheck.diagnose.variation import variation_finding
from compatcheck.stages.base import NotSwept
from compatcheck.state import rewinding
from compatcheck.worker.inductor import inductor_ready
from compatcheck.worker.runs import run_input_set, run_swept

# Seconds the supervisor waits past a phase's budget before it kills the worker: time for the
# deadline inside it to stop Python code and for the phase to say so.
KILL_GRACE_S = 5.0
# The meta run is one forward pass without arithmetic: this much, or this many times the stage's own time.
META_FLOOR_S, META_TIMES = 15.0, 5
# The recipe search stops at --diagnose-budget; this much more lets it write up what it proved.
WRITE_UP_S = 5.0
DIAGNOSE_EXTRA_S = 10.0  # --diagnose-budget's default: the stage's own time plus this


@dataclass(frozen=True)
class Phase:
    name: str
    title: str  # the phase in words, for a reason: 'the device check'
    doing: str  # the step it starts with, in words: 'while diagnosing'
    budget: str  # its budget, in words, for the docs page
    seconds: Callable[..., float]  # its budget, from the stage's run
    applies: Callable[..., bool]
    run: Callable[..., tuple[str, str] | None]  # (outcome, note) when it did not simply run
    lost: str  # what is not known when it does not end
    stoppable: bool = True  # stopped inside the worker at its budget
    closes: bool = False  # the stage's artifact is released after it (stage.close())


def searching(run) -> float:
    """--diagnose-budget, or its default: the stage's own time + 10 s."""
    given = run.ctx.options.diagnose_budget
    return given if given is not None else run.seconds + DIAGNOSE_EXTRA_S


def _on_input_set(run, input_set, index: int, count: int, seen: set) -> str:
    """The step of running input set `index`, with what the stage does for shapes no earlier set had
    (`seen`: the shapes of the sets before it, which this adds to)."""
    said = f"on input set {index + 1} of {count}"
    shapes = tuple(tuple(t.shape) for t in input_set.leaves())
    if seen and run.stage.new_shapes and shapes not in seen:
        said += f", whose shapes are new: {run.stage.new_shapes}"
    seen.add(shapes)
    return said


def build(run) -> None:
    """Build the artifact and run it on every input set, comparing each with eager."""
    if run.stage.inductor(run.ctx.options):
        inductor_ready(run.ctx.workdir, run.ctx.options.device)
    with run.judging():
        run.runner = run.stage.build(run.ctx)
        if run.runner is None:
            run.evidence.runs_nothing = True
            return
        if run.ctx.kept:
            run.runner = rewinding(run.runner)
        run.ctx.runner = run.runner
        input_sets, seen = run.ctx.spec.input_sets, set()  # each read of input_sets copies them
        for index, input_set in enumerate(input_sets):
            run.step(_on_input_set(run, input_set, index, len(input_sets), seen))
            run.evidence.input_sets.append(run_input_set(run.ctx, run.runner, index, input_set, run.stage,
                                                         run.raised))


def sweep(run) -> tuple[str, str] | None:
    """The reference makes the swept input sets (within --sweep-budget); every other stage runs its
    artifact on them, and so does eager where it is a rewritten copy, held to the original's answers."""
    ctx, said = run.ctx, None
    with run.judging():
        if run.evidence.reference:
            made = ctx.swept
            if made.sets or made.caps or made.cut_short:
                run.sweep = SweepInfo(sizes=[one.label for one in made.sets], caps=made.caps, seconds=made.seconds,
                                      cut_short=made.cut_short)
            said = ("cut-short", "--sweep-budget ran out before every size was made") if made.cut_short else None
            if ctx.spec.reference is None:
                return said
        runner = run.stage.sweep_runner(ctx, run.runner)
        for swept in ctx.swept.sets:
            run.step(f"on {swept.label}, a size the input sets lack")
            try:
                run.evidence.swept.append(run_swept(ctx, runner, swept, run.stage.flat_outputs))
            except NotSwept as exc:
                run.evidence.recompiles.append(f"{swept.label}: {exc}")
        if run.evidence.recompiles:
            run.note(f"not run at {'; '.join(run.evidence.recompiles)}")
    return said


def load(run) -> None:
    """The artifact answering many requests at once, as a server batches them."""
    with run.judging():
        run.load = run.stage.under_load(run.ctx)
        run.evidence.load_problem = run.load.problem if run.load else None


def timing(run) -> None:
    """With --bench: latency and throughput per input set."""
    from compatcheck.worker.speed import measure

    with run.judging():
        run.timings = [measure(label, timed, input_set, index, run.ctx.options.bench_seconds)
                       for label, timed in run.stage.timed_runners(run.runner).items()
                       for index, input_set in enumerate(run.ctx.spec.input_sets)]


def diagnosis(run) -> tuple[str, str] | None:
    """The stage's findings from what it saw, then the run's own: where a swept size broke, whether an
    artifact of a model random by design kept varying, whether the sandbox refused what it raised on; a
    pass's note."""
    ctx, stage, status = run.ctx, run.stage, run.status
    if status is Status.BROKEN_ENV:
        run.findings = [broken_environment(stage.name, run.evidence.environment)]
        return None
    failed = None
    try:
        run.findings = stage.diagnose(ctx, run.error)
        if status is Status.FAIL:
            raised = run.error or next(iter(run.raised), None)
            run.findings[:0] = quantized_findings(stage.name, ctx, raised)
            if not run.findings and run.error is None and run.raised:
                run.findings = [artifact_error(stage.name, ctx, run.raised[0], _first_failed(run))]
    except Exception as exc:  # compatcheck's own diagnosis: the verdict stands, the note says so
        failed = ("failed", f"diagnosis failed: {one_line(exc)}")
    if status is Status.MISMATCH:
        run.findings = mismatch_findings(stage.name, ctx, run.findings, lambda one: stage.intermediates(ctx, one))
    # Eager's own finding names each piece of state and its line; where eager raised, ctx.kept raises it again.
    if not run.evidence.reference and ctx.kept:
        run.findings[:0] = froze_findings(stage.name, ctx, run.runner, run.error)
    broken = next((one for one in run.evidence.swept if not one.ok), None)
    if broken is not None and all(one.ok for one in run.evidence.input_sets):
        from compatcheck.diagnose.swept import swept_findings

        run.findings += swept_findings(stage.name, ctx, broken)
    if status in (Status.PASS, Status.MISMATCH) and run.evidence.input_sets and ctx.varies and \
            not run.evidence.reference:  # eager's own finding names the cause (stages/eager.py)
        run.findings.append(variation_finding(stage.name, ctx, status is Status.PASS))
    run.findings[:0] = sandbox_findings(stage.name, ctx, [run.error, *run.raised])  # the cause, before its effects
    if status is Status.PASS:
        try:
            run.note(stage.note(ctx))
        except Exception as exc:  # a note that fails must not cost the stage its verdict
            run.note(f"(note failed: {one_line(exc)})")
    return failed


def _first_failed(run) -> str:
    """The first input set or swept size the artifact failed on, in words."""
    one = next((one for one in [*run.evidence.input_sets, *run.evidence.swept] if not one.ok), None)
    if one is None or one.index < 0:
        return f"the swept size {one.label}" if one is not None and one.label else "an input"
    return f"input set {one.index + 1}"


def meta(run) -> None:
    """The device check: forward on the meta device, for what would stay on the CPU on a GPU."""
    from compatcheck.diagnose.device import device_traps

    found = device_traps(run.ctx)
    run.findings[:0] = found.findings  # the first a deployer to a GPU meets
    if run.status is Status.PASS:
        run.note(found.note)


def recipes(run) -> tuple[str, str] | None:
    from compatcheck.worker.recipe_search import try_recipes

    note = try_recipes(run, searching(run))
    return ("timed-out", note) if note else None


def _passed_so_far(run) -> bool:
    return run.error is None and run.runner is not None and all(one.ok for one in run.evidence.input_sets)


def _timeout(run) -> float:
    return run.ctx.options.timeout


PHASES: tuple[Phase, ...] = (
    Phase("build", "the build", "while building", "--timeout", _timeout, lambda run: True, build, "no verdict",
          stoppable=False),
    Phase("sweep", "the sweep", "on the swept sizes", "--timeout (making them: --sweep-budget)", _timeout,
          _passed_so_far, sweep, "the sizes after it not checked"),
    Phase("load", "the load run", "under load", "--timeout", _timeout,
          lambda run: run.stage.serves and _passed_so_far(run), load, "no answer under load"),
    Phase("timing", "the timing", "while timing", "--timeout", _timeout,
          lambda run: run.ctx.options.bench and _passed_so_far(run) and not run.evidence.load_problem, timing,
          "no timings"),
    Phase("diagnosis", "the diagnosis", "while diagnosing",
          "2 × --diagnose-budget + 20 s (the graph-break search takes at most one)",
          lambda run: 2 * searching(run) + 20, lambda run: True, diagnosis, "its findings are missing", closes=True),
    Phase("meta", "the device check", "while checking device traps on meta",
          f"{META_FLOOR_S:g} s, or {META_TIMES} × the stage's own time",
          lambda run: max(META_FLOOR_S, META_TIMES * run.seconds),
          lambda run: run.stage.name == REFERENCE and run.status is not Status.BROKEN_ENV, meta,
          "device traps not checked"),
    Phase("recipes", "the recipe search", "while trying recipes",
          f"--diagnose-budget (default: the stage's own time + {DIAGNOSE_EXTRA_S:g} s), + {WRITE_UP_S:g} s to write up",
          lambda run: searching(run) + WRITE_UP_S, lambda run: run.status in (Status.FAIL, Status.MISMATCH), recipes,
          "recipes not all tried"),
)
