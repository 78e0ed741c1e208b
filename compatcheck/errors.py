"""Errors the user caused (bad model file, bad option): shown as one line, exit code 2."""


class UsageError(Exception):
    """A problem with the command line or the model file, reported without a traceback."""
