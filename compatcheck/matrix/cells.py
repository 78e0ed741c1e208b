"""Cells: one model on one environment, run as `compatcheck run` by the environment's python.

Each cell's file is written atomically the moment the cell finishes, so an interrupted matrix keeps
every finished cell, and --resume runs only the others.
"""

from __future__ import annotations

import hashlib
import json
import os
import shutil
import signal
import subprocess
import tempfile
import threading
import time
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass
from pathlib import Path

from pydantic import BaseModel, Field, ValidationError, field_validator

import compatcheck
from compatcheck import ladder
from compatcheck.errors import UsageError
from compatcheck.files import read_json, write_atomically
from compatcheck.matrix import environments
from compatcheck.matrix.config import NAME, Matrix, RunSettings, model_name, settings
from compatcheck.target import check_model_path, parse_target
from compatcheck.report.model import READABLE_VERSIONS, Report, load_report, migrate
from compatcheck.options import at

CELL_SCHEMA_VERSION = 1


class CellResult(BaseModel):
    """A cell's file: which cell, and the report of its run or why there is none."""

    cell_schema_version: int = CELL_SCHEMA_VERSION
    environment: str = Field(pattern=NAME)
    model: str = Field(pattern=NAME)
    target: str = Field(description="PATH[:FACTORY] as matrix.yaml gives it")
    order: tuple[int, int] = Field(description="the environment's and the model's place in matrix.yaml")
    key: str = Field(description="environment key and run settings: --resume reruns a cell whose key changed")
    requirements: list[str] = []
    resolved: dict[str, str] = Field({}, description="what the requirements resolved to, e.g. torch 2.16.0.dev20261128")
    seconds: float = 0.0
    error: str | None = Field(None, description="why the cell has no report: environment build, usage error")
    unavailable: bool = Field(False, description="an optional environment whose index could not be reached: "
                                                 "reported, never gated")
    report: Report | None = None

    @field_validator("report", mode="before")
    @classmethod
    def _readable(cls, value):
        """A report of a schema_version this compatcheck reads, migrated; any other is refused."""
        if isinstance(value, dict):
            if value.get("schema_version") not in READABLE_VERSIONS:
                raise ValueError(f"its report has schema_version {value.get('schema_version')!r}; this compatcheck "
                                 f"reads schema_version {READABLE_VERSIONS[0]} to {READABLE_VERSIONS[-1]}")
            return migrate(value)
        return value

    @property
    def id(self) -> str:
        return f"{self.environment}/{self.model}"

    @property
    def file_name(self) -> str:
        return f"{self.environment}__{self.model}.json"

    @property
    def finished(self) -> bool:
        return self.error is None and self.report is not None and not self.report.interrupted


@dataclass
class Cell:
    environment: str
    model: str
    target: str  # absolute PATH[:FACTORY]
    settings: RunSettings
    order: tuple[int, int]
    requirements: list[str]

    @property
    def id(self) -> str:
        return f"{self.environment}/{self.model}"

    @property
    def stem(self) -> str:
        return f"{self.environment}__{self.model}"

    def key(self, env_key: str) -> str:
        text = json.dumps([env_key, self.target, self.settings.model_dump()], sort_keys=True)
        return hashlib.sha256(text.encode()).hexdigest()[:16]

    def result(self, key: str, **fields) -> CellResult:
        return CellResult(environment=self.environment, model=self.model, target=self.target, order=self.order,
                          key=key, requirements=self.requirements, **fields)


def plan(matrix: Matrix, base: Path, only: list[str] | None = None) -> list[Cell]:
    """Every environment x model, in matrix.yaml's order; `only` keeps the cells with those ids."""
    cells = []
    for env_index, (env_name, env) in enumerate(matrix.environments.items()):
        for model_index, entry in enumerate(matrix.models.paths):
            path, factory = parse_target(entry.path)
            try:
                check_model_path(base / path)
            except UsageError as exc:
                raise UsageError(f"models.paths[{model_index}]: {exc}") from None
            target = str((base / path).resolve()) + ("" if factory == "get_model" else f":{factory}")
            cells.append(Cell(env_name, model_name(entry), target, settings(matrix.models, entry),
                              (env_index, model_index), env.requirements))
    if only:
        unknown = sorted(set(only) - {cell.id for cell in cells})
        if unknown:
            raise UsageError(f"no cell {unknown[0]!r} in the matrix; cells are ENVIRONMENT/MODEL, e.g. {cells[0].id}")
        cells = [cell for cell in cells if cell.id in only]
    return cells


def load_cell(path: Path) -> CellResult:
    """A cell file, which may come from a job that is not trusted: bounded in size and nesting (read_json),
    its names those matrix.yaml allows, its report of a schema version this compatcheck reads."""
    try:
        data = read_json(Path(path))
    except FileNotFoundError:
        raise UsageError(f"cell file not found: {path}") from None
    except (OSError, ValueError) as exc:
        raise UsageError(f"cannot read cell file {path}: {exc}") from None
    if not isinstance(data, dict) or data.get("cell_schema_version") != CELL_SCHEMA_VERSION:
        raise UsageError(f"{path} is not a cell file of this compatcheck (cell_schema_version "
                         f"{CELL_SCHEMA_VERSION}); cell files are written by `compatcheck matrix`")
    try:
        return CellResult.model_validate(data)
    except ValidationError as exc:
        raise UsageError(f"{path}: {exc.errors()[0]['msg']} at {'.'.join(map(str, exc.errors()[0]['loc']))}") from None


def run_arguments(cell: Cell) -> list[str]:
    """`compatcheck run` arguments for the cell: the flags of the run settings matrix.yaml gave."""
    args = ["run", cell.target, "--quiet", "--stages", ",".join(cell.settings.stages or ladder.NAMES)]
    for option in at("matrix"):
        value = getattr(cell.settings, option.name) if option.name != "stages" else None
        if value is not None:
            args += [option.flag, ",".join(value) if isinstance(value, list) else str(value)]
    return args


class CellProcesses:
    """Runs cells in up to `jobs` processes side by side and stops them all on an interrupt."""

    def __init__(self, out_dir: Path, on_done):
        self.cells_dir = out_dir / "cells"
        self.logs_dir = out_dir / "logs"
        self.on_done = on_done
        self.lock = threading.Lock()
        self.processes: set[subprocess.Popen] = set()
        self.stopping = False
        self.source = Path(tempfile.mkdtemp(prefix="compatcheck-source-"))
        # Only the running compatcheck goes on the cells' PYTHONPATH, not the folder around it,
        # which may be a site-packages with another torch.
        (self.source / "compatcheck").symlink_to(Path(compatcheck.__file__).resolve().parent)

    def run(self, cell: Cell, built: environments.Built, key: str) -> CellResult | None:
        """The cell's result, also written to its file; None when it was interrupted (nothing written)."""
        report_path = self.logs_dir / f"{cell.stem}.report.json"
        log_path = self.logs_dir / f"{cell.stem}.log"
        report_path.unlink(missing_ok=True)
        command = [str(built.python), "-m", "compatcheck", *run_arguments(cell), "--json", str(report_path)]
        started = time.monotonic()
        with log_path.open("w") as log:
            log.write(f"$ PYTHONPATH={self.source} {' '.join(command)}\n")
            log.flush()
            with self.lock:
                if self.stopping:
                    return None
                process = subprocess.Popen(
                    command, stdin=subprocess.DEVNULL, stdout=log, stderr=subprocess.STDOUT,
                    env={**os.environ, "PYTHONPATH": str(self.source)},
                    start_new_session=True,  # Ctrl-C reaches the matrix, which stops its cells itself
                )
                self.processes.add(process)
            code = process.wait()
            with self.lock:
                self.processes.discard(process)
        seconds = round(time.monotonic() - started, 1)
        if self.stopping or code == 130:
            return None
        if report_path.exists():
            result = cell.result(key, seconds=seconds, report=load_report(report_path))
            result.resolved = built.resolved
        else:
            lines = log_path.read_text(errors="replace").splitlines()
            first = next((i for i, line in enumerate(lines) if line.startswith("error:")), len(lines) - 5)
            said = " ".join(" ".join(lines[max(first, 1):]).split())  # the error, unwrapped; line 0 is the command
            result = cell.result(key, seconds=seconds,
                                 error=f"compatcheck run exited with status {code}: {said[-500:]}")
        return self.write(result)

    def write(self, result: CellResult) -> CellResult:
        write_atomically(self.cells_dir / result.file_name, result.model_dump_json(indent=2))
        self.on_done(result)
        return result

    def stop(self) -> None:
        with self.lock:
            self.stopping = True
            for process in self.processes:
                try:
                    os.killpg(process.pid, signal.SIGTERM)  # `compatcheck run` stops its worker on SIGTERM
                except ProcessLookupError:
                    pass

    def close(self) -> None:
        shutil.rmtree(self.source, ignore_errors=True)


def run_matrix(matrix: Matrix, cells: list[Cell], out_dir: Path, env_dir: Path, jobs: int, resume: bool,
               display, refresh: bool = False) -> list[CellResult]:
    """Build or reuse each environment in turn and run its cells meanwhile; return every cell's result."""
    for folder in ("cells", "logs"):
        (out_dir / folder).mkdir(parents=True, exist_ok=True)
    processes = CellProcesses(out_dir, display.cell_done)
    results: dict[str, CellResult] = {}
    pool = ThreadPoolExecutor(jobs)
    futures = []
    try:
        for env_name, env in matrix.environments.items():
            mine = [cell for cell in cells if cell.environment == env_name]
            if not mine:
                continue
            try:
                key, built, offline = _environment_key(env_name, env, env_dir, display, refresh)
            except environments.BuildError as exc:
                display.env_failed(env_name, str(exc))
                for cell in mine:
                    results[cell.id] = processes.write(cell.result("", error=f"environment {env_name} could not be "
                                                                          f"built: {exc}"))
                continue
            if offline:  # e.g. the nightly index off this network: reported, not gated
                display.env_unavailable(env_name, offline)
                for cell in mine:
                    results[cell.id] = processes.write(cell.result(
                        cell.key(key), unavailable=True, error=f"optional environment {env_name}: {offline}"))
                continue
            todo = _to_run(mine, key, out_dir, resume, results, display)
            if not todo:
                continue
            try:
                built = built or environments.ensure(env_name, env, env_dir, display.env_building)
            except environments.BuildError as exc:
                display.env_failed(env_name, str(exc))
                for cell in todo:
                    results[cell.id] = processes.write(cell.result(cell.key(key), error=f"environment {env_name} "
                                                                                      f"could not be built: {exc}"))
                continue
            display.env_ready(built)
            futures += [(cell, pool.submit(processes.run, cell, built, cell.key(key))) for cell in todo]
        for cell, future in futures:
            result = future.result()
            if result is not None:
                results[cell.id] = result
    except BaseException:
        processes.stop()
        pool.shutdown(wait=True, cancel_futures=True)
        raise
    finally:
        pool.shutdown(wait=True)
        processes.close()
    return [results[cell.id] for cell in cells if cell.id in results]


def _environment_key(env_name: str, env, env_dir: Path, display, refresh: bool):
    """The key of the environment's cells, the environment where that needed building it, and why an
    optional environment cannot be reached (then nothing is built)."""
    inputs = environments.key_inputs(env)
    key = environments.env_key(inputs)
    offline = environments.unreachable(env) if env.optional else None
    if offline or not (refresh or not environments.pinned(env)):
        return key, None, offline
    # What it resolves to decides its cells' key: a resumed cell must have run on the same.
    built = environments.ensure(env_name, env, env_dir, display.env_building, refresh=refresh)
    return environments.env_key({**inputs, "resolved": built.resolved}), built, None


def _to_run(mine: list[Cell], key: str, out_dir: Path, resume: bool, results: dict, display) -> list[Cell]:
    """The cells still to run; with --resume, one that finished under the same key is taken as it is."""
    todo = []
    for cell in mine:
        previous = _previous(out_dir / "cells" / f"{cell.stem}.json") if resume else None
        if previous and previous.finished and previous.key == cell.key(key):
            results[cell.id] = previous
            display.cell_done(previous, resumed=True)
        else:
            todo.append(cell)
    return todo


def _previous(path: Path) -> CellResult | None:
    try:
        return load_cell(path)
    except UsageError:
        return None
