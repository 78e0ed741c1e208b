"""What goes wrong on the Triton side, with the server's own words."""

from __future__ import annotations


class TritonError(Exception):
    """The server could not be started, reached or kept running."""


class TritonLoadError(TritonError):
    """The server refused to load the model; `reason` is what the server said, log lines included."""

    def __init__(self, model: str, message: str, log_lines: list[str] | tuple[str, ...] = ()):
        self.model = model
        first, _, rest = message.strip().rstrip(";").strip().partition("\n")
        # The first line carries everything short (the answer, then the log lines) so one-line
        # summaries keep it; a Python traceback from the model's initialize() follows below.
        self.reason = "; ".join([first, *log_lines]) + (f"\n{rest}" if rest.strip() else "")
        super().__init__(self.reason)
