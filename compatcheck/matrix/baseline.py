"""The gate: every cell's stage verdicts against the baseline's, as PyTorch's nightly accuracy check does.

pass         passes as expected, or is skipped where the baseline expects no pass either
xfail        fails (or is skipped), and the baseline knows it does not pass
improved     passes where the baseline expected it not to: --update-baseline to lock it in
new-failure  fails or is skipped where the baseline expected a pass: a regression, which fails the run
fail         fails, and the baseline has nothing for it (a new model, stage or environment)
missing      the baseline expects a verdict that this run did not produce (fails the run with --strict)
broken-env   torch, onnx or onnxruntime could not import what it needs: the environment needs fixing, the
             model was not judged (fails the run, and says the fix; never written into the baseline)
unavailable  an optional environment whose index could not be reached (reported, never fails the run)

A skip is what a stage gets when a stage it needs failed: never a failure of its own, but no pass either.
"""

from __future__ import annotations

from dataclasses import dataclass
from enum import Enum
from pathlib import Path

import yaml
from pydantic import BaseModel, ValidationError

from compatcheck.errors import UsageError
from compatcheck.files import read_yaml_text, write_atomically
from compatcheck.matrix.cells import CellResult
from compatcheck.matrix.config import package_name
from compatcheck.report.model import Finding, StageResult, Status

HEADER = ("# Expected verdicts per environment, model and stage, with the versions they were seen on.\n"
          "# Rewritten by `compatcheck matrix --update-baseline`; a regression is a pass here that fails now.\n")


class Outcome(str, Enum):
    PASS = "pass"
    FAIL = "fail"
    XFAIL = "xfail"
    IMPROVED = "improved"
    NEW_FAILURE = "new-failure"
    MISSING = "missing"
    BROKEN_ENV = "broken-env"
    UNAVAILABLE = "unavailable"


class BaselineEnvironment(BaseModel):
    versions: dict[str, str] = {}
    models: dict[str, dict[str, Status]] = {}


class Baseline(BaseModel):
    environments: dict[str, BaselineEnvironment] = {}

    def expected(self, environment: str, model: str) -> dict[str, Status]:
        env = self.environments.get(environment)
        return dict(env.models.get(model, {})) if env else {}

    def cells(self) -> set[str]:
        return {f"{env}/{model}" for env, entry in self.environments.items() for model in entry.models}


@dataclass
class Verdict:
    """One stage of one cell, judged."""

    environment: str
    model: str
    stage: str | None  # None: the whole cell, which produced no report and has nothing in the baseline
    outcome: Outcome
    expected: Status | None
    actual: Status | None
    note: str | None = None  # the finding or reason behind a non-pass, or why the cell is missing
    finding: Finding | None = None


def judge(expected: Status | None, actual: Status | None) -> Outcome:
    if actual is None:
        return Outcome.MISSING
    if actual is Status.BROKEN_ENV:
        return Outcome.BROKEN_ENV
    if actual is Status.PASS:
        return Outcome.IMPROVED if expected not in (None, Status.PASS) else Outcome.PASS
    if expected is Status.PASS:
        return Outcome.NEW_FAILURE
    if actual is Status.SKIP and expected in (None, Status.SKIP):
        return Outcome.PASS
    return Outcome.FAIL if expected is None else Outcome.XFAIL


STACK = ("torch", "onnx", "onnxscript", "onnxruntime", "numpy", "python")


def pinned(result: CellResult) -> list[str]:
    """The packages of the report's environment that the cell's requirements name; torch if none."""
    named = {package_name(r) for r in result.requirements}
    found = result.report.environment if result.report else {}
    return [name for name in found if package_name(name) in named] or ["torch"]


def versions(result: CellResult) -> dict[str, str]:
    """The versions a cell ran on: the deployment stack and whatever its environment pins."""
    found = result.report.environment if result.report else {}
    return {name: found[name] for name in dict.fromkeys([*STACK, *pinned(result)]) if name in found}


def describe(stage: StageResult) -> tuple[str | None, Finding | None]:
    """What to say about a stage that did not pass: its first finding, else its reason."""
    if stage.findings:
        finding = stage.findings[0]
        text = f"{finding.kind} `{finding.op}`" if finding.op else finding.kind
        if finding.where:
            text += f" at {finding.where}"
        return f"{text}: {finding.message}", finding
    return stage.reason, None


def gate(results: list[CellResult], baseline: Baseline, cells: set[str]) -> list[Verdict]:
    """Judge every stage of `cells` (ids ENV/MODEL): those with a result and those the baseline expects."""
    by_id = {result.id: result for result in results}
    verdicts = []
    for cell in sorted(cells, key=lambda c: by_id[c].order if c in by_id else (1 << 30, 0)):
        environment, model = cell.split("/", 1)
        expected = baseline.expected(environment, model)
        result = by_id.get(cell)
        if result is not None and result.unavailable:
            verdicts.append(Verdict(environment, model, None, Outcome.UNAVAILABLE, None, None, result.error))
            continue
        if result is None or not result.finished:
            why = result.error if result else "no cell file"
            verdicts += [Verdict(environment, model, stage, Outcome.MISSING, status, None, why)
                         for stage, status in expected.items()] or [
                Verdict(environment, model, None, Outcome.MISSING, None, None, why)]
            continue
        ran = {stage.name: stage for stage in result.report.stages}
        for name in dict.fromkeys([*ran, *expected]):
            stage = ran.get(name)
            actual = stage.status if stage else None
            note, finding = describe(stage) if stage and actual is not Status.PASS else (
                (None if stage else "the stage did not run"), None)
            verdicts.append(Verdict(environment, model, name, judge(expected.get(name), actual),
                                    expected.get(name), actual, note, finding))
    return verdicts


def load(path: Path) -> Baseline:
    """The baseline at `path`; an empty one while the file does not exist yet."""
    path = Path(path)
    if not path.exists():
        return Baseline()
    try:
        data = yaml.safe_load(read_yaml_text(path)) or {}
    except (OSError, ValueError, yaml.YAMLError) as exc:
        raise UsageError(f"cannot read baseline {path}: {exc}") from None
    try:
        return Baseline.model_validate(data)
    except ValidationError as exc:
        error = exc.errors()[0]
        raise UsageError(f"baseline {path}: {'.'.join(map(str, error['loc']))}: {error['msg']}") from None


def updated(baseline: Baseline, results: list[CellResult], keep: set[str] | None = None) -> Baseline:
    """The baseline with every finished cell's verdicts; `keep` (the matrix's cells) drops the rest."""
    new = baseline.model_copy(deep=True)
    for result in results:
        if not result.finished:
            continue  # a cell that did not run keeps what was expected of it
        env = new.environments.setdefault(result.environment, BaselineEnvironment())
        env.versions = versions(result)
        before = env.models.get(result.model, {})
        env.models[result.model] = {  # a broken environment judged nothing: what was expected stands
            stage.name: before.get(stage.name) if stage.status is Status.BROKEN_ENV else stage.status
            for stage in result.report.stages if stage.status is not Status.BROKEN_ENV or stage.name in before}
    if keep is not None:
        for name, env in list(new.environments.items()):
            env.models = {model: v for model, v in env.models.items() if f"{name}/{model}" in keep}
            if not env.models:
                del new.environments[name]
    return new


def save(baseline: Baseline, path: Path) -> None:
    data = baseline.model_dump(mode="json")
    write_atomically(Path(path), HEADER + yaml.safe_dump(data, sort_keys=False))
