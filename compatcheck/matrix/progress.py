"""What `compatcheck matrix` shows while it works: environments as they are built, cells as they finish."""

from __future__ import annotations

from rich.console import Console
from rich.progress import BarColumn, MofNCompleteColumn, Progress, SpinnerColumn, TextColumn, TimeElapsedColumn

from compatcheck.matrix.cells import CellResult
from compatcheck.matrix.environments import Built
from compatcheck.untrusted import clean


class Display:
    def __init__(self, console: Console, total: int, unit: str = "cells"):
        self.unit = unit
        self.progress = Progress(SpinnerColumn(), TextColumn("{task.description}"), BarColumn(), MofNCompleteColumn(),
                                 TimeElapsedColumn(), console=console)
        self.task = self.progress.add_task(unit, total=total)
        self.say = lambda text: self.progress.console.print(  # a cell's error may quote the model
            clean(text), markup=False, highlight=False, soft_wrap=True)

    def __enter__(self) -> "Display":
        self.progress.start()
        return self

    def __exit__(self, *exc) -> bool:
        self.progress.stop()
        return False

    def env_building(self, name: str, key: str, installer: str) -> None:
        self.say(f"environment {name}: building {key} with {installer}")
        self.progress.update(self.task, description=f"{self.unit} (building {name})")

    def env_ready(self, built: Built) -> None:
        if built.resolved:
            self.say(f"environment {built.name}: " + ", ".join(f"{n} {v}" for n, v in built.resolved.items()))
        if built.reused:
            self.say(f"environment {built.name}: reusing {built.path} "
                     f"(saves the {built.seconds:.0f} s it took to build)")
        else:
            self.say(f"environment {built.name}: built in {built.seconds:.0f} s ({built.path})")
        self.progress.update(self.task, description=self.unit)

    def env_failed(self, name: str, message: str) -> None:
        self.say(f"environment {name}: build failed: {message}")

    def env_unavailable(self, name: str, why: str) -> None:
        self.say(f"environment {name}: unavailable, and optional, so its cells are reported and not gated: {why}")

    def advance(self) -> None:
        self.progress.advance(self.task)

    def cell_done(self, result: CellResult, resumed: bool = False) -> None:
        if result.unavailable:
            text = "unavailable"
        elif result.error:
            text = f"error: {result.error}"
        else:
            counts: dict[str, int] = {}
            for stage in result.report.stages:
                counts[stage.status.value] = counts.get(stage.status.value, 0) + 1
            text = ", ".join(f"{n} {status}" for status, n in counts.items())
        self.say(f"{result.id}: {text} ({'kept from the last run' if resumed else f'{result.seconds:.0f} s'})")
        self.advance()
