"""The report: a pydantic model (the JSON is the source of truth) and its renderers."""
