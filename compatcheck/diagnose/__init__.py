"""Turning errors, warnings and stack traces into findings that point at the user's code."""
