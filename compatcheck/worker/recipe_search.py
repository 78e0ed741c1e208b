"""The recipe phase: rebuild a stage that failed the other ways it offers (another mode, keyword or
sample) and the catalog's recipes for the library code its findings point into, each on a pristine
model; one that passes on every input set, every swept size and under load becomes a finding with
the exact call. One that does not help is never offered. A recipe that gets the stage past the plain
call's blocker to another one is tried again with each recipe the stage offers for that one."""

from __future__ import annotations

import shutil
from dataclasses import dataclass, field

import torch

from compatcheck.deadline import within
from compatcheck.ladder import BY_NAME
from compatcheck.diagnose.export import SAVE_FAILED
from compatcheck.diagnose.proven import factory_only, proven_recipe
from compatcheck.errors import one_line
from compatcheck.recipes import Recipe, apply_setting, combined
from compatcheck.state import rewinding
from compatcheck.stages.base import NotSwept, StageContext
from compatcheck.worker.guards import isolated_globals, recording_warnings
from compatcheck.worker.runs import MODEL_ERRORS, run_input_set, run_swept
from compatcheck.worker.skips import skip_reason


def _catalog(ctx: StageContext, findings: list) -> list[Recipe]:
    """The catalog's recipes for the library code `findings` point into."""
    from compatcheck.diagnose.catalog import load

    return [Recipe(entry.title, keywords=tuple(entry.exporter.items()),
                   setting=(("call", entry.setting.call, tuple(entry.setting.args)) if entry.setting.call else
                            ("attribute", entry.setting.attribute, entry.setting.value)) if entry.setting else None,
                   factory=entry.factory)
            for entry in load(ctx.options.rewrites).recipes_for(findings)]


MOST_PARTS = 3  # recipes combined at most: each for the blocker the ones before it got the stage to


@dataclass
class Tried:
    """What building and running the stage with one recipe gave: passed (True, False, or 'factory' where
    only the factory can set it), where it stopped in words, and what the search goes on from there with."""

    passed: bool | str
    stopped: str = ""
    error: BaseException | None = None
    results: list = field(default_factory=list)  # the stopping check's input sets, as far as they ran
    stage: object = None


def try_recipes(run, budget: float) -> str | None:
    """Try the recipes in order within `budget` seconds, the search ending at the first that passes; a
    recipe that gets the stage past the plain call's blocker is combined with the recipes for the next
    one. A note when the budget ran out first."""
    own = run.stage.recipes(run.ctx, run.error)
    static = [run.stage.static] if run.stage.static and any(
        f.kind == "torch-bug" or f.message.startswith(SAVE_FAILED) for f in run.findings) else []
    # The sample first (its finding needs the answer), then the library's own switches, then the stage's
    # other settings; static sizes last, where torch alone fails on symbolic ones.
    library = _catalog(run.ctx, run.findings)
    queue = [*(r for r in own if r.sample), *library, *(r for r in own if not r.sample), *static]
    recipes, outcomes, trying = list(queue), {}, None
    calls: dict = {}  # recipe -> the call its build ran, as the finding shows it
    plain = {recipe.what for recipe in queue}  # what the plain call's blocker is answered with
    with within(budget) as timer:
        while queue and not any(tried.passed is True and _offered(r) for r, tried in outcomes.items()):
            trying = queue.pop(0)
            if trying.sample and trying.parts == 1 and any(
                    tried.passed is True and one.sample and one.parts == 1 for one, tried in outcomes.items()):
                continue  # one sample that passes is the answer: the other input sets need no build
            run.ctx.step(f"while trying {trying.what} (recipes)")
            tried = outcomes[trying] = _passes_with(type(run.stage), run.ctx, trying, calls)
            after = [one for one in _from_there(run.ctx, trying, tried, plain) if one not in recipes]
            run.recipes.append(f"{trying.what}: {_said(trying, tried, after)}")
            queue[:0], recipes = after, recipes + after
    note = None
    if timer.expired and trying is not None:
        note = f"the recipe search was cut short: --diagnose-budget {budget:g}s ran out"
        run.recipes += [f"{trying.what}: not finished, {note}"] + [f"{r.what}: not tried, {note}" for r in queue]
    _conclude(run, recipes, {recipe: tried.passed for recipe, tried in outcomes.items()}, calls)
    return note


def _offered(recipe: Recipe) -> bool:
    """Whether a recipe that passed becomes a passes-with finding: the sample alone answers the size-one
    finding instead."""
    return not recipe.sample or recipe.parts > 1


def _said(recipe: Recipe, tried: Tried, after: list[Recipe]) -> str:
    """What a recipe gave, in words: where it stopped, and what the search goes on with from there."""
    if tried.passed is True:
        return "passes on every input set"
    if tried.passed == "factory":
        return (f"not checked: only the factory can set it ({recipe.factory})" if recipe.factory else
                "not checked: the model has no such setting")
    added = [one.what.removeprefix(f"{recipe.what}, with ") for one in after]
    past = f"; past the blocker before it, the search goes on adding {' or '.join(added)}" if added else ""
    return f"fails too, stopped {tried.stopped}{past}"


def _from_there(ctx: StageContext, recipe: Recipe, tried: Tried, plain: set[str]) -> list[Recipe]:
    """Where `recipe` got the stage past the plain call's blocker to another one: `recipe` combined with
    each recipe the stage offers for that one (its own, and the catalog's for its findings there) and not
    for the plain call's."""
    if tried.passed is not False or recipe.parts >= MOST_PARTS:
        return []
    saved, ctx.input_results = ctx.input_results, tried.results  # the stage reads them for a size-one blocker
    try:
        found = tried.stage.diagnose(ctx, tried.error) if tried.error is not None else []
        offered = [then for then in [*tried.stage.recipes(ctx, tried.error), *_catalog(ctx, found)]
                   if then.what not in plain]
    except MODEL_ERRORS:  # no findings there: the stage's own recipes are what it offers
        offered = [then for then in tried.stage.recipes(ctx, tried.error) if then.what not in plain]
    finally:
        ctx.input_results = saved
    return [one for one in (combined(recipe, then) for then in offered) if one]


def _conclude(run, recipes: list[Recipe], outcomes: dict, calls: dict) -> None:
    """What the recipes tried prove: the sample's answer for a size-one finding, a finding per recipe that
    passed, and one per recipe only the factory can set."""
    from compatcheck.diagnose.sample import SIZE_ONE, proven_order

    stage, ctx = run.stage, run.ctx
    samples = [(recipe, outcomes.get(recipe)) for recipe in recipes if recipe.sample and recipe.parts == 1]
    for finding in run.findings:
        if finding.op == SIZE_ONE:
            proven_order(ctx, finding, samples, run.findings)
    for recipe, passed in outcomes.items():
        if passed is True and _offered(recipe):
            call = "\n".join(filter(None, [recipe.settings and _setting_lines(ctx, recipe), recipe.before,
                                           calls.get(recipe), recipe.then]))
            run.findings.append(proven_recipe(stage.name, recipe.what, call))
        elif passed == "factory" and recipe.factory:
            run.findings.append(factory_only(stage.name, recipe.what, recipe.factory))


def _setting_lines(ctx: StageContext, recipe) -> str:
    """The lines that apply the recipe's settings, as they applied to a fresh copy of the model."""
    model = ctx.spec.pristine.copy() if ctx.spec.pristine else ctx.spec.model
    return "\n".join(apply_setting(model, setting) for setting in recipe.settings)


def _passes_with(stage_class, ctx: StageContext, recipe, calls: dict) -> Tried:
    """Build a fresh stage with `recipe` on a pristine model, in a folder of its own, and run every input
    set through it, and through the stage that runs its artifact where it names one (the ONNX file in
    onnxruntime): a recipe passes only where what users deploy passes. 'factory' where the recipe's
    setting is not on the built model. The call the build ran goes into `calls`."""
    from compatcheck import stages

    stage = stage_class()
    artifacts, folder = dict(ctx.artifacts), ctx.workdir / "recipes" / stage.name
    ctx.recipe, ctx.artifact_dir = recipe, folder
    model = ctx.spec.fresh_model()
    # Another sample or exporter keyword changes what the stages this one runs the artifact of build (the
    # ONNX file of onnxruntime, exported by the other exporter): they are built again with the recipe.
    built = [stages.load(name) for name in BY_NAME[stage.name].requires] if recipe.sample or recipe.keywords else []
    checks = [*built, stage, *([stages.load(stage.proven_by)] if stage.proven_by else [])]
    calls.pop(recipe, None)
    try:
        if recipe.settings:
            try:
                for setting in recipe.settings:
                    apply_setting(model, setting)
            except LookupError:
                return Tried("factory", stage=stage)
        ran = False  # proven only by running something on every input set
        with isolated_globals(), recording_warnings([]), torch.no_grad():
            for check in checks:
                tried = _checked(ctx, stage, check, calls, recipe)
                if isinstance(tried, Tried):
                    return tried
                ran = ran or tried
            return Tried(ran, stage=stage)
    finally:
        for check in checks:
            check.close()
        ctx.recipe, ctx.artifact_dir = None, None
        ctx.artifacts.clear()
        ctx.artifacts.update(artifacts)
        shutil.rmtree(folder, ignore_errors=True)


def _checked(ctx: StageContext, stage, check, calls: dict, recipe) -> Tried | bool:
    """Build `check` (the stage, or the stage that runs its artifact) and run it on every input set, every
    swept size and under load: where it stopped, else whether it had anything to run."""
    def stop(where: str, error=None, results=()) -> Tried:
        return Tried(False, f"in {check.name} at {where}", error, list(results), stage)

    if check is not stage and skip_reason(check, ctx):
        return stop("its start: it cannot run here")  # nothing here runs the artifact: not proven
    try:
        runner = check.build(ctx)
    except MODEL_ERRORS as exc:
        return stop(f"the build: {one_line(exc, 200)}", exc)
    finally:
        if check.call_ran is not None and check.name != stage.proven_by:  # the calls a user writes, in order
            calls[recipe] = "\n".join(filter(None, [calls.get(recipe), check.call_ran.source()]))
    if runner is None:
        return False
    runner = rewinding(runner) if ctx.kept else runner
    results, raised = [], []
    for index, one in enumerate(ctx.spec.input_sets):
        results.append(run_input_set(ctx, runner, index, one, check, raised))
        if not results[-1].ok:
            why = results[-1].error or results[-1].structure or "its outputs differ from eager's"
            return stop(f"input set {index + 1}: {why}", raised[-1] if raised else None, results)
    sweeper = check.sweep_runner(ctx, runner)
    for swept in ctx.swept.sets:  # a recipe must hold where the plain call is held too
        try:
            result = run_swept(ctx, sweeper, swept, check.flat_outputs)
        except NotSwept:  # nor more: a size the plain call leaves out, the recipe does too
            continue
        if not result.ok:
            return stop(f"swept size {swept.label}: {result.error or 'its outputs differ'}")
    load = check.under_load(ctx)
    return stop(f"the load run: {load.problem}") if load and load.problem else True
