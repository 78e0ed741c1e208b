"""Deadlines for blocks of Python code in the worker, nested: each block keeps its own end, the
earliest fires first.

A timer signal raises OutOfTime in the main thread, again every half second in case the code under
it swallowed the first one; code blocked in C never sees it, so the supervisor's kill stays the last
word (see worker/phases.py). Outside the main thread a block runs without a deadline.
"""

from __future__ import annotations

import signal
import threading
import time
from contextlib import contextmanager

REPEAT_S = 0.5


class OutOfTime(BaseException):
    """A BaseException, so the `except Exception` of the model's code or a library's lets it through."""

    def __init__(self, timer: "Timer"):
        super().__init__(f"out of time after {timer.seconds:g}s")
        self.timer = timer


class Timer:
    def __init__(self, seconds: float):
        self.seconds = seconds
        self.end = time.monotonic() + seconds
        self.expired = False


_active: list[Timer] = []
_previous = None


def _fire(signum, frame) -> None:
    due = [timer for timer in _active if timer.end <= time.monotonic()]
    _arm(REPEAT_S if due else None)
    if due:
        raise OutOfTime(due[0])  # the outermost: every block inside it unwinds


def _arm(delay: float | None = None) -> None:
    if not _active:
        signal.setitimer(signal.ITIMER_REAL, 0)
        return
    if delay is None:
        delay = min(timer.end for timer in _active) - time.monotonic()
    signal.setitimer(signal.ITIMER_REAL, max(delay, 0.001))


@contextmanager
def within(seconds: float):
    """Run the block for at most `seconds`; the yielded timer says whether the block was stopped
    (`expired`), in which case the code after the block goes on as if it had ended."""
    global _previous
    timer = Timer(seconds)
    if threading.current_thread() is not threading.main_thread():
        yield timer
        return
    if not _active:
        _previous = signal.signal(signal.SIGALRM, _fire)
    _active.append(timer)
    _arm()
    try:
        yield timer
    except OutOfTime as exc:
        if exc.timer is not timer:
            raise
        timer.expired = True
    finally:
        _active.remove(timer)
        _arm()
        if not _active:
            signal.signal(signal.SIGALRM, _previous)
