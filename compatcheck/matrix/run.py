"""`compatcheck matrix`: plan the cells, build or reuse the environments, run the cells, then the shared merge."""

from __future__ import annotations

import time
from pathlib import Path

from rich.console import Console

from compatcheck.errors import UsageError
from compatcheck.matrix import config, emit, environments
from compatcheck.matrix.cells import plan, run_matrix
from compatcheck.matrix.merge import finish
from compatcheck.matrix.progress import Display

EMITTERS = {"github": emit.github}


def main(matrix_path: Path, console: Console, *, jobs: int, resume: bool, strict: bool, update_baseline: bool,
         out: Path, env_dir: Path | None, only: list[str] | None, emit_for: str | None,
         refresh_envs: bool = False, build_only: bool = False) -> int:
    matrix = config.load(matrix_path)
    base = matrix_path.resolve().parent
    everything = plan(matrix, base)
    cells = plan(matrix, base, only)
    if emit_for:  # one of the --emit row's choices (options.py), each a key of EMITTERS
        print(EMITTERS[emit_for](cells))
        return 0
    if jobs < 1:
        raise UsageError(f"--jobs must be at least 1, got {jobs}")
    env_dir = env_dir or environments.default_dir()
    if build_only:
        return build_environments(matrix, {cell.environment for cell in cells}, env_dir, console, refresh_envs)
    started = time.monotonic()
    with Display(console, len(cells)) as display:
        results = run_matrix(matrix, cells, out, env_dir, jobs, resume, display,
                             refresh=refresh_envs)
    console.print(f"{len(results)} of {len(cells)} cells in {time.monotonic() - started:.0f} s", highlight=False)
    return finish(results, base / matrix.baseline if matrix.baseline else None, out, console,
                  cells={cell.id for cell in cells}, strict=strict, update=update_baseline,
                  keep={cell.id for cell in everything})


def build_environments(matrix: config.Matrix, names: set[str], env_dir: Path, console: Console,
                       refresh: bool) -> int:
    """Build (or reuse) the environments the cells need, and run nothing: CI starts this beside its other
    work, and the matrix run that follows waits on each build's lock and reuses it. Returns 1 if a
    required environment did not build."""
    failed = False
    wanted = {name: env for name, env in matrix.environments.items() if name in names}
    with Display(console, len(wanted), unit="environments") as display:
        for name, env in wanted.items():
            offline = environments.unreachable(env) if env.optional else None
            if offline:
                display.env_unavailable(name, offline)
                continue
            try:
                display.env_ready(environments.ensure(name, env, env_dir, display.env_building, refresh=refresh))
            except environments.BuildError as exc:
                display.env_failed(name, str(exc))
                failed = failed or not env.optional
            display.advance()
    return int(failed)
