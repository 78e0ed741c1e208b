"""The parent side of a run: cache, resume, the workers and what contains them, the report."""
