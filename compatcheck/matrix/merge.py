"""The end that `matrix` and `merge` share: gate the cells on the baseline, write the reports, pick the exit code."""

from __future__ import annotations

from pathlib import Path

from rich.console import Console

from compatcheck.errors import UsageError
from compatcheck.files import write_atomically
from compatcheck.matrix import baseline as expected
from compatcheck.matrix.baseline import Outcome
from compatcheck.matrix.cells import CellResult, load_cell
from compatcheck.matrix.render import Grid, junit, markdown, short, to_json
from compatcheck.untrusted import clean

EXIT_GATE = 1


def finish(results: list[CellResult], baseline_path: Path | None, out_dir: Path, console: Console, *,
           cells: set[str] | None = None, strict: bool = False, update: bool = False,
           keep: set[str] | None = None) -> int:
    """Gate `cells` (default: every cell with a result or in the baseline) and write matrix.md,
    matrix.json and junit.xml into out_dir. `keep`: the cells an updated baseline may hold."""
    if update and baseline_path is None:
        raise UsageError("--update-baseline needs a baseline: set `baseline:` in matrix.yaml")
    base = expected.load(baseline_path) if baseline_path else expected.Baseline()
    if cells is None:
        cells = {result.id for result in results} | base.cells()
    verdicts = expected.gate(results, base, cells)
    grid = Grid(results, verdicts, base)
    regressions, missing = grid.counts[Outcome.NEW_FAILURE], grid.counts[Outcome.MISSING]
    broken = grid.counts[Outcome.BROKEN_ENV]
    code = EXIT_GATE if regressions or broken or (strict and missing) else 0
    out_dir.mkdir(parents=True, exist_ok=True)
    write_atomically(out_dir / "matrix.md", markdown(grid))
    write_atomically(out_dir / "matrix.json", to_json(grid, code))
    write_atomically(out_dir / "junit.xml", junit(grid, strict))

    def say(text: str, **style) -> None:
        console.print(clean(text), markup=False, highlight=False, soft_wrap=True, **style)

    for v in verdicts:
        if v.outcome in (Outcome.NEW_FAILURE, Outcome.IMPROVED, Outcome.MISSING, Outcome.BROKEN_ENV,
                         Outcome.UNAVAILABLE):
            why = f" ({short(v.note)})" if v.note and v.outcome is not Outcome.IMPROVED else ""
            say(f"{v.outcome.value}: {v.environment}/{v.model}{f' {v.stage}' if v.stage else ''}{why}")
    counts = ", ".join(f"{grid.counts[o]} {o.value}" for o in Outcome)
    say(f"{counts}; wrote {out_dir}/matrix.md, matrix.json, junit.xml")
    if update:
        expected.save(expected.updated(base, results, keep), baseline_path)
        say(f"baseline {baseline_path} rewritten from this run")
        return 0
    if broken:
        say(f"{broken} stage{'s' * (broken != 1)} could not run in a broken environment: fix the environment "
            "(the note says how); the model was not judged there", style="bold red")
    if regressions:
        say(f"{regressions} regression{'s' * (regressions != 1)} against {baseline_path}", style="bold red")
    elif strict and missing and not broken:
        say(f"{missing} missing verdict{'s' * (missing != 1)} (--strict)", style="bold red")
    return code


def merge_files(paths: list[Path], baseline_path: Path | None, out_dir: Path, console: Console,
                strict: bool = False) -> int:
    """`compatcheck merge`: cell files from anywhere (CI jobs' uploads) through the same gate."""
    results: dict[str, CellResult] = {}
    for path in paths:
        result = load_cell(path)
        if result.id in results:
            raise UsageError(f"two cell files for {result.id}: the second is {path}")
        results[result.id] = result
    if not results:
        raise UsageError("no cell files given")
    return finish(list(results.values()), baseline_path, out_dir, console, strict=strict)
