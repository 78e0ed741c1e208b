"""The recipe phase: rebuild a stage that failed the other ways it offers (another mode, keyword or
sample) and the catalog's recipes for the library code its findings point into, each on a pristine
model; one that passes on every input set, every swept size and under load becomes a finding with
the exact call. One that does not help is never offered."""

from __future__ import annotations

import shutil

import torch

from compatcheck.deadline import within
from compatcheck.diagnose.proven import factory_only, proven_recipe
from compatcheck.recipes import Recipe, apply_setting
from compatcheck.state import rewinding
from compatcheck.stages.base import StageContext
from compatcheck.worker.guards import isolated_globals, recording_warnings
from compatcheck.worker.runs import MODEL_ERRORS, run_input_set, run_swept
from compatcheck.worker.skips import skip_reason


def _catalog(run) -> list[Recipe]:
    from compatcheck.diagnose.catalog import load

    return [Recipe(entry.title, keywords=tuple(entry.exporter.items()),
                   setting=(("call", entry.setting.call, tuple(entry.setting.args)) if entry.setting.call else
                            ("attribute", entry.setting.attribute, entry.setting.value)) if entry.setting else None,
                   factory=entry.factory)
            for entry in load(run.ctx.options.rewrites).recipes_for(run.findings)]


def try_recipes(run, budget: float) -> str | None:
    """Try the recipes in order within `budget` seconds, the search ending at the first that passes;
    a note when the budget ran out first."""
    own = run.stage.recipes(run.ctx, run.error)
    # The sample first (its finding needs the answer), then the library's own switches, then the stage's
    # other settings; static sizes last, where torch alone fails on symbolic ones.
    static = [run.stage.static] if run.stage.static and any(f.kind == "torch-bug" for f in run.findings) else []
    recipes = [*(r for r in own if r.sample), *_catalog(run), *(r for r in own if not r.sample), *static]
    outcomes: dict = {}
    calls: dict = {}  # recipe -> the call its build ran, as the finding shows it
    trying = None
    with within(budget) as timer:
        for trying in recipes:
            if any(passed is True and not tried.sample for tried, passed in outcomes.items()):
                break
            run.ctx.step(f"while trying {trying.what} (recipes)")
            outcomes[trying] = _passes_with(type(run.stage), run.ctx, trying, calls)
            said = {True: "passes on every input set", False: "fails too", "factory": "not checked: only the "
                    f"factory can set it ({trying.factory})" if trying.factory else
                    "not checked: the model has no such setting"}
            run.recipes.append(f"{trying.what}: {said[outcomes[trying]]}")
    note = None
    if timer.expired:
        note = f"the recipe search was cut short: --diagnose-budget {budget:g}s ran out"
        left = recipes[recipes.index(trying):]
        run.recipes += [f"{left[0].what}: not finished, {note}"] + [f"{r.what}: not tried, {note}" for r in left[1:]]
    _conclude(run, recipes, outcomes, calls)
    return note


def _conclude(run, recipes: list[Recipe], outcomes: dict, calls: dict) -> None:
    """What the recipes tried prove: the sample's answer for a size-one finding, a finding per recipe that
    passed, and one per recipe only the factory can set."""
    from compatcheck.diagnose.sample import SIZE_ONE, proven_order

    stage, ctx = run.stage, run.ctx
    sample = next((recipe for recipe in recipes if recipe.sample), None)
    for finding in run.findings:
        if finding.op == SIZE_ONE:
            proven_order(ctx, finding, sample, outcomes.get(sample) if sample else None)
    for recipe, passed in outcomes.items():
        if passed is True and not recipe.sample:
            call = "\n".join(filter(None, [recipe.setting and _setting_line(ctx, recipe), recipe.before,
                                           calls.get(recipe), recipe.then]))
            run.findings.append(proven_recipe(stage.name, recipe.what, call))
        elif passed == "factory" and recipe.factory:
            run.findings.append(factory_only(stage.name, recipe.what, recipe.factory))


def _setting_line(ctx: StageContext, recipe) -> str:
    """The line that applies the recipe's setting, as it applied to a fresh copy of the model."""
    return apply_setting(ctx.spec.pristine.copy() if ctx.spec.pristine else ctx.spec.model, recipe.setting)


def _passes_with(stage_class, ctx: StageContext, recipe, calls: dict):
    """Build a fresh stage with `recipe` on a pristine model, in a folder of its own, and run every input
    set through it, and through the stage that runs its artifact where it names one (the ONNX file in
    onnxruntime): a recipe passes only where what users deploy passes. 'factory' where the recipe's
    setting is not on the built model. The call the build ran goes into `calls`."""
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
                runner = rewinding(runner) if runner is not None and ctx.kept else runner
                if check is stage and stage.call_ran is not None:
                    calls[recipe] = stage.call_ran.source()
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


