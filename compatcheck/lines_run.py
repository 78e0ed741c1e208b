"""The lines of the model file its original ran: how `compatcheck fix` tells a rewrite the input sets
exercise from one on a branch none of them takes."""

from __future__ import annotations

import sys
from contextlib import contextmanager


class LinesRun:
    """The lines run in frames of one module (its globals): the original model file's, beside its
    rewritten copy, which has the same file name and other globals."""

    def __init__(self, module_globals: dict):
        self.module_globals = module_globals
        self.lines: set[int] = set()

    @contextmanager
    def recording(self):
        def line(frame, event, arg):
            if event == "line":
                self.lines.add(frame.f_lineno)
            return line

        def call(frame, event, arg):
            return line if frame.f_globals is self.module_globals else None

        previous = sys.gettrace()
        sys.settrace(call)
        try:
            yield
        finally:
            sys.settrace(previous)
