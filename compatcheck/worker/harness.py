"""Run one stage in the worker: build, run every input set, compare with eager, collect findings.

Everything here is the same for every stage; stages only build runners and read their evidence.
"""

from __future__ import annotations

import os
import time
import traceback
import warnings
from contextlib import contextmanager

import torch

from compatcheck import torch_features
from compatcheck.compare import FP64_MULTIPLIER, compare_outputs, flatten
from compatcheck.errors import UsageError, one_line
from compatcheck.report.model import Finding, InputSetResult, Precision, StageResult, Status, SweepInfo
from compatcheck.ladder import BY_NAME, REFERENCE, missing_artifact
from compatcheck.recipes import Recipe, apply_setting
from compatcheck.stages.base import Stage, StageContext, identical
from compatcheck.variation import SEEDS, clock_moved

MAX_ERROR_TEXT = 20_000
# What the model's code may raise: sys.exit() and KeyboardInterrupt too (the worker has its own
# session, so no Ctrl-C reaches it), which would otherwise end the worker and read as a crash.
MODEL_ERRORS = (Exception, SystemExit, KeyboardInterrupt)


@contextmanager
def isolated_globals():
    """Undo what a stage or the model changes in process-wide state, so later stages do not inherit it."""
    saved = (torch.get_default_dtype(), torch.is_grad_enabled(), torch.get_num_threads(), os.getcwd())
    try:
        yield
    finally:
        dtype, grad, threads, cwd = saved
        torch.set_default_dtype(dtype)
        torch.set_grad_enabled(grad)
        if torch.get_num_threads() != threads:
            torch.set_num_threads(threads)
        os.chdir(cwd)


@contextmanager
def recording_warnings(into: list):
    """Record every warning with the Python stack at the moment it was raised."""
    with warnings.catch_warnings():
        warnings.simplefilter("always")

        def record(message, category, filename, lineno, file=None, line=None):
            into.append((warnings.WarningMessage(message, category, filename, lineno), traceback.extract_stack()))

        warnings.showwarning = record
        yield


def skip_reason(stage: Stage, ctx: StageContext) -> str | None:
    if stage.name != REFERENCE:
        # eager may run in another lane's worker; its verdict, if known, decides, else its outputs do.
        eager = ctx.previous.get(REFERENCE)
        if eager is not None and eager != Status.PASS.value:
            return f"eager did not pass ({eager}): nothing to compare with"
        try:
            ctx.reference
        except UsageError:
            raise
        except MODEL_ERRORS as exc:
            return f"eager raised {one_line(exc)}: nothing to compare with"
    for needed in BY_NAME[stage.name].requires:
        if needed not in ctx.artifacts:
            return missing_artifact(needed, ctx.previous.get(needed), ctx.blockers.get(needed))
    for feature in stage.needs(ctx):
        reason = torch_features.missing(feature)
        if reason:
            return reason
    return stage.available(ctx)


def _problem(one: InputSetResult) -> str | None:
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


def _on_input_set(stage: Stage, input_set, index: int, count: int, seen: set) -> str:
    """The step of running input set `index`, with what the stage does for shapes no earlier set had
    (`seen`: the shapes of the sets before it, which this adds to)."""
    said = f"on input set {index + 1} of {count}"
    shapes = tuple(tuple(t.shape) for t in input_set.leaves())
    if seen and stage.new_shapes and shapes not in seen:
        said += f", whose shapes are new: {stage.new_shapes}"
    seen.add(shapes)
    return said


def _summarize(sets: list[InputSetResult]) -> str | None:
    for one in sets:
        problem = _problem(one)
        if problem:
            return f"input set {one.index + 1}{':' if not problem.startswith('output ') else ','} {problem}"
    return None


def run_stage(stage: Stage, ctx: StageContext) -> StageResult:
    result = StageResult(name=stage.name, status=Status.SKIP)
    reason = skip_reason(stage, ctx)
    if reason:
        result.reason = reason
        return result

    ctx.warnings = []
    ctx.input_results = result.input_sets
    error = None
    raised: list[BaseException] = []  # what the runner raised, per input set that failed
    ctx.spec.fresh_model()  # what earlier stages did to their copies is not this stage's concern
    copy_problem = ctx.spec.pristine.problem if ctx.spec.pristine else None
    started = time.perf_counter()
    # The deployer's recipe: eval mode (the spec's copies are), and no autograd while building and running.
    with isolated_globals(), recording_warnings(ctx.warnings), torch.no_grad():
        try:
            ctx.step("while building")
            runner = stage.build(ctx)
            if runner is not None:
                input_sets, seen = ctx.spec.input_sets, set()  # each read of input_sets copies them
                for index, input_set in enumerate(input_sets):
                    ctx.step(_on_input_set(stage, input_set, index, len(input_sets), seen))
                    result.input_sets.append(run_input_set(ctx, runner, index, input_set, stage, raised))
                if not BY_NAME[stage.name].reference and all(s.ok for s in result.input_sets):
                    for swept in ctx.swept.sets:
                        ctx.step(f"on {swept.label}, a size the input sets lack")
                        result.swept.append(run_swept(ctx, runner, swept, stage.flat_outputs))
                if all(s.ok for s in result.input_sets):
                    ctx.step("under load")
                    result.load = stage.under_load(ctx)
                if ctx.options.bench and all(s.ok for s in result.input_sets) and not (result.load and
                                                                                        result.load.problem):
                    ctx.step("while timing")
                    result.timings = _time(stage, ctx, runner)
        except UsageError:
            raise  # the model file's fault, not the stage's: the run stops with it
        except MODEL_ERRORS as exc:
            error = exc
            result.status = Status.FAIL
            result.reason = one_line(exc)
            result.error = "".join(traceback.format_exception(exc))[-MAX_ERROR_TEXT:]
        finally:
            result.seconds = round(time.perf_counter() - started, 3)
            ctx.stage_seconds = result.seconds
            result.backend = stage.backend(ctx)
            ctx.step("while diagnosing")
            try:
                result.findings = stage.diagnose(ctx, error)
            except Exception as exc:
                result.findings = []
                result.reason = (result.reason or "") + f" (diagnosis failed: {one_line(exc)})"
            stage.close()

    result.artifacts = {k: v for k, v in ctx.artifacts.items() if k == stage.name}
    if error is None:
        errors = [(s, s.error) for s in result.input_sets if s.error]
        leaves = [leaf for s in result.input_sets for leaf in s.leaves]
        abs_errors = [leaf.max_abs_error for leaf in leaves if leaf.max_abs_error is not None]
        rel_errors = [leaf.max_rel_error for leaf in leaves if leaf.max_rel_error is not None]
        result.max_abs_error = max(abs_errors) if abs_errors else None
        result.max_rel_error = max(rel_errors) if rel_errors else None
        result.status = status_of(result.input_sets)
        if errors:
            result.error = errors[0][1]
        result.reason = _summarize(result.input_sets)
        broken = next((one for one in result.swept if not one.ok), None)
        if result.status is Status.PASS and broken is not None:
            result.status = Status.FAIL if broken.error else Status.MISMATCH
            result.reason = f"at {broken.label}, which your input sets lack: {_problem(broken) or ''}"
            result.findings += _swept_findings(stage.name, ctx, broken)
        if BY_NAME[stage.name].reference and (ctx.swept.sets or ctx.swept.caps or ctx.swept.cut_short):
            result.sweep = SweepInfo(sizes=[one.label for one in ctx.swept.sets], caps=ctx.swept.caps,
                                     seconds=ctx.swept.seconds, cut_short=ctx.swept.cut_short)
        if result.status is Status.PASS and result.load and result.load.problem:
            result.status, result.reason = Status.MISMATCH, result.load.problem
        if runner is None and result.status is Status.PASS:
            result.reason = "built and checked; nothing here to run it with, the next stage runs it"
        elif result.status is Status.PASS and any((leaf.fp64_verdict or "").startswith("within-noise")
                                                  for leaf in leaves):
            result.reason = "differences from eager are within fp64-adjudicated noise"
        if ctx.reduced and leaves:
            result.precision = _precision(ctx, stage, leaves)
            if result.status is Status.PASS:
                result.reason = _precision_reason(result.precision)
    if result.status is Status.FAIL:
        _blame_environment(result, error or (raised[0] if raised else None))
    # Only a stage that ran its input sets asks: for a forward that raised, the reference would raise too.
    if result.status in (Status.PASS, Status.MISMATCH) and result.input_sets and ctx.varies:
        if not BY_NAME[stage.name].reference:  # eager's own finding names the cause (stages/eager.py)
            result.findings.append(_variation_finding(stage.name, ctx, result))
        if result.status is Status.PASS:
            result.reason = _not_compared(ctx, stage)
    if result.status is Status.PASS:
        try:
            note = stage.note(ctx)
        except Exception as exc:  # a note that fails must not cost the stage its verdict
            note = f"(note failed: {one_line(exc)})"
        result.reason = "; ".join(filter(None, [result.reason, note])) or None
    if copy_problem:
        result.reason = "; ".join(filter(None, [result.reason, f"the model's copy for this stage: {copy_problem}"]))
    if result.status in (Status.FAIL, Status.MISMATCH):
        _try_recipes(stage, ctx, result, error)
    _release(error, *raised)
    return result


def _try_recipes(stage: Stage, ctx: StageContext, result: StageResult, error: BaseException | None) -> None:
    """Rebuild the stage the other ways it offers (another mode, keyword or sample) and the catalog's
    recipes for the library code its findings point into, each on a pristine model, within
    --diagnose-budget (default: the stage's own time + 10 s); one that passes on every input set becomes
    a finding with the exact call. One that does not help is never offered."""
    from compatcheck.diagnose.catalog import load
    from compatcheck.diagnose.sample import SIZE_ONE, proven_order

    catalog = [Recipe(entry.title, keywords=tuple(entry.exporter.items()),
                      setting=(("call", entry.setting.call, tuple(entry.setting.args)) if entry.setting.call else
                               ("attribute", entry.setting.attribute, entry.setting.value)) if entry.setting else None,
                      factory=entry.factory)
               for entry in load(ctx.options.rewrites).recipes_for(result.findings)]
    own = stage.recipes(ctx, error)
    # The sample first (its finding needs the answer), then the library's own switches, then the stage's
    # other settings; the search ends at the first that passes.
    recipes = [*(r for r in own if r.sample), *catalog, *(r for r in own if not r.sample)]
    budget = ctx.options.diagnose_budget or result.seconds + 10
    started = time.perf_counter()
    outcomes: dict = {}
    for recipe in recipes:
        if any(passed is True and not tried.sample for tried, passed in outcomes.items()):
            break
        spent = time.perf_counter() - started
        # A recipe costs about what the stage's own build did; one that would run past --timeout would
        # cost the stage its verdict.
        past_timeout = result.seconds + spent + 1.5 * result.seconds > ctx.options.timeout
        if spent > budget or past_timeout:
            outcomes[recipe] = None
            limit = f"--timeout {ctx.options.timeout:g}" if past_timeout else f"--diagnose-budget {budget:g}"
            result.recipes.append(f"{recipe.what}: not tried, the search was cut short after {spent:.1f}s ({limit})")
            continue
        ctx.step(f"while trying {recipe.what} (diagnosis)")
        outcomes[recipe] = _passes_with(type(stage), ctx, recipe)
        said = {True: "passes on every input set", False: "fails too", "factory": "not checked: only the factory "
                f"can set it ({recipe.factory})" if recipe.factory else "not checked: the model has no such setting"}
        result.recipes.append(f"{recipe.what}: {said[outcomes[recipe]]}")
    sample = next((recipe for recipe in recipes if recipe.sample), None)
    for finding in result.findings:
        if finding.op == SIZE_ONE:
            proven_order(ctx, finding, sample, outcomes.get(sample) if sample else None)
    for recipe, passed in outcomes.items():
        if passed is True and not recipe.sample:
            call = "\n".join(filter(None, [recipe.setting and _setting_line(ctx, recipe), stage.call(ctx, recipe)]))
            result.findings.append(Finding(
                stage=stage.name, kind="passes-with", op=recipe.what, rewrite=call,
                message=f"{stage.name} passes with {recipe.what}, checked on every input set"))
        elif passed == "factory" and recipe.factory:
            result.findings.append(Finding(
                stage=stage.name, kind="passes-with", op=recipe.what,
                message=f"not checked: needs a change in your factory: build the model with {recipe.factory} "
                        f"({recipe.what}); the built model offers no way to switch it afterwards"))


def _precision(ctx: StageContext, stage: Stage, leaves: list) -> Precision:
    """The stage's two numbers in reduced precision: its error against the float64 run where it comes
    nearest what the rule allows, and how far it moved from the float32 answers."""
    judged = [leaf for leaf in leaves if leaf.fp64_error is not None]
    allowed = {id(leaf): FP64_MULTIPLIER * leaf.eager_fp64_error + (leaf.atol or 0.0) / 10 for leaf in judged}
    worst = max(judged, key=lambda leaf: leaf.fp64_error / allowed[id(leaf)] if allowed[id(leaf)] else 0.0,
                default=None)
    moved = [leaf.float32_error for leaf in leaves if leaf.float32_error is not None]
    try:
        upcast = stage.upcast(ctx)
    except Exception as exc:  # a note on the pass, not the verdict
        upcast = f"not known: {one_line(exc)}"
    return Precision(dtype=str(ctx.reduced).removeprefix("torch."), fp64_error=worst and worst.fp64_error,
                     eager_fp64_error=worst and worst.eager_fp64_error, allowed=worst and allowed[id(worst)],
                     float32_error=max(moved) if moved else None, upcast=upcast)


def _precision_reason(precision: Precision) -> str:
    parts = []
    if precision.fp64_error is not None:
        parts.append(f"{precision.dtype}: rms error to float64 {precision.fp64_error:.1e} ≤ {precision.allowed:.1e} "
                     f"(eager's {precision.eager_fp64_error:.1e})")
    if precision.float32_error is not None:
        parts.append(f"{precision.float32_error:.1e} from float32")
    if precision.upcast:
        parts.append(precision.upcast)
    return "; ".join(parts)


def _setting_line(ctx: StageContext, recipe) -> str:
    """The line that applies the recipe's setting, as it applied to a fresh copy of the model."""
    return apply_setting(ctx.spec.pristine.copy() if ctx.spec.pristine else ctx.spec.model, recipe.setting)


def _passes_with(stage_class, ctx: StageContext, recipe):
    """Build a fresh stage with `recipe` on a pristine model, in a folder of its own, and run every input
    set through it, and through the stage that runs its artifact where it names one (the ONNX file in
    onnxruntime): a recipe passes only where what users deploy passes. 'factory' where the recipe's
    setting is not on the built model."""
    import shutil

    from compatcheck import stages

    stage = stage_class()
    artifacts, folder = dict(ctx.artifacts), ctx.workdir / "recipes" / stage.name
    ctx.recipe, ctx.artifact_dir = recipe, folder
    model = ctx.spec.fresh_model()
    checks = [stage, *([stages.load(stage.proven_by)] if stage.proven_by else [])]
    ran = False  # proven only by running something on every input set
    try:
        if recipe.setting:
            try:
                apply_setting(model, recipe.setting)
            except LookupError:
                return "factory"
        with isolated_globals(), recording_warnings([]), torch.no_grad():
            for check in checks:
                if check is not stage and skip_reason(check, ctx):
                    return False  # nothing here runs the artifact: the recipe is not proven
                runner = check.build(ctx)
                if runner is None:
                    continue
                if not all(run_input_set(ctx, runner, index, one, check).ok
                           for index, one in enumerate(ctx.spec.input_sets)):
                    return False
                if not all(run_swept(ctx, runner, swept, check.flat_outputs).ok for swept in ctx.swept.sets):
                    return False  # a recipe must hold where the plain call is held too
                load = check.under_load(ctx)
                if load and load.problem:
                    return False
                ran = True
            return ran
    except MODEL_ERRORS:
        return False
    finally:
        for check in checks:
            check.close()
        ctx.recipe, ctx.artifact_dir = None, None
        ctx.artifacts.clear()
        ctx.artifacts.update(artifacts)
        shutil.rmtree(folder, ignore_errors=True)


def _release(*errors: BaseException | None) -> None:
    """Drop the locals the stage's exceptions hold through their tracebacks (a model that failed after
    allocating gigabytes), so the stages after it get that memory back."""
    for error in errors:
        seen = set()
        while error is not None and id(error) not in seen:
            seen.add(id(error))
            traceback.clear_frames(error.__traceback__)
            error = error.__cause__ or error.__context__


def _blame_environment(result: StageResult, error: BaseException | None) -> None:
    """A failure from a library's failed import becomes broken-env, with the fix instead of findings."""
    from compatcheck.diagnose.broken_env import fault

    found = fault(error)
    if found is None:
        return
    what, fix = found
    result.status = Status.BROKEN_ENV
    result.reason = f"broken environment: {what}; fix: {fix}"
    result.findings = [Finding(stage=result.name, kind="broken-environment", message=f"{what}; fix: {fix}")]


def _time(stage: Stage, ctx: StageContext, runner) -> list:
    from compatcheck.worker.speed import measure

    return [measure(label, timed, input_set, index, ctx.options.bench_seconds)
            for label, timed in stage.timed_runners(runner).items()
            for index, input_set in enumerate(ctx.spec.input_sets)]


def status_of(sets: list[InputSetResult]) -> Status:
    """The verdict of a stage whose artifact ran on `sets`."""
    if any(s.error for s in sets):
        return Status.FAIL
    return Status.PASS if all(s.ok for s in sets) else Status.MISMATCH


def run_input_set(ctx, runner, index, input_set, stage: Stage, raised: list | None = None) -> InputSetResult:
    """Run `stage`'s artifact on one input set and compare its outputs with eager's; what it raises goes
    into `raised`."""
    started = time.perf_counter()
    torch.manual_seed(SEEDS[0])  # as eager's reference run was
    try:
        outputs = runner(input_set)
    except MODEL_ERRORS as exc:
        if raised is not None:
            raised.append(exc)
        return InputSetResult(index=index, ok=False, error=one_line(exc, 400),
                              seconds=round(time.perf_counter() - started, 4))
    seconds = round(time.perf_counter() - started, 4)
    noise = ctx.noise[index] if ctx.noise is not None else None
    leaves, structure = compare_outputs(
        ctx.reference[index], outputs, ctx.tolerances, flat=stage.flat_outputs, noise=noise,
        fp64=lambda: ctx.fp64(index), values=ctx.unvalued(index, stage.same_random),
        drawn=set(ctx.varies.random_leaves[index]) if ctx.varies.random else set(),
        float32=(lambda: ctx.float32(index)) if ctx.reduced else None,
    )
    ok = all(leaf.ok for leaf in leaves) and bool(leaves or not structure)
    if ok and ctx.varies:
        ok, structure = _varies_too(ctx, runner, input_set, outputs, structure, raised)
    return InputSetResult(index=index, ok=ok, structure=structure, seconds=seconds, leaves=leaves)


def run_swept(ctx, runner, swept, flat: bool) -> InputSetResult:
    """Run the artifact on one swept input set and compare with eager's outputs on it."""
    result = _run_swept(ctx, runner, swept, flat)
    result.dims = list(swept.dims)
    return result


def _run_swept(ctx, runner, swept, flat: bool) -> InputSetResult:
    """Run the artifact on one swept input set and compare with eager's outputs on it."""
    started = time.perf_counter()
    torch.manual_seed(SEEDS[0])
    try:
        outputs = runner(swept.input_set.copy())
    except MODEL_ERRORS as exc:
        return InputSetResult(index=-1, label=swept.label, ok=False, error=one_line(exc, 400),
                              seconds=round(time.perf_counter() - started, 4))
    seconds = round(time.perf_counter() - started, 4)
    leaves, structure = compare_outputs(swept.reference, outputs, ctx.tolerances, flat=flat,
                                        fp64=lambda: ctx.float64(swept.input_set))
    ok = all(leaf.ok for leaf in leaves) and bool(leaves or not structure)
    return InputSetResult(index=-1, label=swept.label, ok=ok, structure=structure, seconds=seconds, leaves=leaves)


def _swept_findings(stage: str, ctx, broken: InputSetResult) -> list[Finding]:
    """Where an artifact breaks at a swept size: the lines that pin a dynamic dimension, found by tracing
    the model (draft_export's guards), else the size itself."""
    from compatcheck.diagnose import shapes

    pinned = shapes.pinned_by_code(ctx)
    if pinned:
        found = shapes.findings(stage, ctx, pinned)
        for finding in found:
            finding.message += f"; it shows at {broken.label}, which the input sets lack"
        return found
    for one in shapes.specializations(ctx, dict.fromkeys(broken.dims)):
        at = ctx.spec.user.innermost(one.stack)
        if one.guard and at is not None:
            return [ctx.spec.user.finding(
                stage, "dynamic-shape", f"{one.dim} is dynamic, but the code decides on its size ({one.guard}): "
                f"at {broken.label}, which the input sets lack, the artifact takes the path of the sample's size",
                location=at, stack=one.stack, op=broken.label)]
    used = shapes.size_used_at(ctx, broken.dims)
    if used is not None:
        finding = ctx.spec.user.finding(
            stage, "dynamic-shape", f"{used[2]} is dynamic, and this line of forward reads it: at {broken.label}, "
            "which the input sets lack, the artifact does not do what eager does, as if the size had been fixed "
            "when it was built", location=used[:2], op=broken.label)
        finding.rewrite = shapes.shape_branch(finding.code, used[2])
        return [finding]
    return [Finding(stage=stage, kind="dynamic-shape", op=broken.label,
                    message=f"the artifact {'fails' if broken.error else 'differs from eager'} at {broken.label}, "
                            f"which the input sets lack, though eager runs there ({_problem(broken)}); no line of "
                            f"yours decides on that size: add an input set of that size to reproduce it")]


def _varies(ctx) -> str:
    """'aten.bernoulli_ at model.py:12': what makes eager's outputs change, and where."""
    site = ctx.varies.first()
    return site.what + (f" at {ctx.spec.user.display(site.frame.filename)}:{site.frame.lineno}" if site.frame else "")


def _lost(ctx) -> str:
    if ctx.varies.random:
        return (f"the randomness was lost: eager's outputs change with the seed ({_varies(ctx)}), these do not: one "
                "draw was frozen in when the artifact was built")
    return (f"the reading of the clock was lost: eager's outputs change with the time ({_varies(ctx)}), these do "
            "not: the time the artifact was built at is frozen in")


def _variation_finding(stage: str, ctx, result) -> Finding:
    """For a model random by design or reading the clock: its outputs were not compared value by value;
    the artifact kept varying (a note), or it did not (the randomness was lost when it was built)."""
    site = ctx.varies.first()
    if result.status is Status.PASS:
        return ctx.spec.user.finding(
            stage, "nondeterministic", f"values not compared: {_what_varies(ctx)}; the artifact's outputs change with "
            f"the {'seed' if ctx.varies.random else 'time'} as eager's do, and their types and shapes match",
            location=site.frame, op=site.what)
    return ctx.spec.user.finding(stage, "variation-lost", _lost(ctx), location=site.frame, op=site.what)


def _not_compared(ctx, stage: Stage) -> str:
    """The reason of a pass for a model whose outputs change by design: which were compared, which not."""
    names = [name for name, _ in flatten(ctx.reference[0])[0]]
    unvalued = ctx.unvalued(0, stage.same_random)
    if not unvalued:
        return f"{_what_varies(ctx)}: compared under eager's seed, whose numbers the artifact draws; they vary here too"
    skipped = [f"output {names[i]}" for i in sorted(unvalued) if i < len(names)]
    compared = [f"output {name}" for i, name in enumerate(names) if i not in unvalued]
    return (f"values of {', '.join(skipped[:4])}{', ...' if len(skipped) > 4 else ''} not compared: {_what_varies(ctx)}; "
            f"they vary here too" + (f"; {', '.join(compared[:4])} compared by value" if compared else ""))


def _what_varies(ctx) -> str:
    return f"{'random' if ctx.varies.random else 'reads the clock'} ({_varies(ctx)})"


def _varies_too(ctx, runner, input_set, outputs, structure, raised) -> tuple[bool, str | None]:
    """For a model random by design (or reading the clock): run the artifact again under the other seed
    (or with the clock moved); its outputs must change too."""
    try:
        if ctx.varies.random:
            torch.manual_seed(SEEDS[1])
            again = runner(input_set.copy())
        else:
            with clock_moved():
                torch.manual_seed(SEEDS[0])
                again = runner(input_set.copy())
    except MODEL_ERRORS as exc:
        if raised is not None:
            raised.append(exc)
        return False, f"running it again under another {'seed' if ctx.varies.random else 'clock'} raised {one_line(exc)}"
    if identical(outputs, again):
        return False, _lost(ctx)
    return True, structure
