"""The rewrite catalog: what to write instead of an op or construct that blocks a target.

The built-in catalog is rewrites.yaml beside this file; `--rewrites FILE` adds entries (same
format) that take precedence, and replace built-in entries with the same id. Imports no torch,
so the CLI can validate a user's file before starting the worker.
"""

from __future__ import annotations

import functools
from pathlib import Path

import yaml
from pydantic import BaseModel, ConfigDict, Field, ValidationError, field_validator, model_validator

from compatcheck.errors import UsageError
from compatcheck.report.model import Finding
from compatcheck.ladder import NAMES

BUILTIN = Path(__file__).with_name("rewrites.yaml")


class Entry(BaseModel):
    model_config = ConfigDict(extra="forbid")

    id: str = Field(pattern=r"^[a-z0-9][a-z0-9-]*$")
    title: str
    ops: list[str] = Field([], description="finding ops it covers; 'aten.median' also covers 'aten.median.dim'")
    kinds: list[str] = Field([], description="finding kinds it covers; empty: any kind of a listed op")
    breaks: list[str] = Field(min_length=1, description="the stages (targets) it blocks or miscomputes")
    why: str
    rewrite: str = Field(min_length=1, description="the replacement, as code")
    caveat: str | None = Field(None, description="numerical or semantic difference of the rewrite")
    status: str | None = Field(None, description="where it stands with today's versions, e.g. passes every stage")

    @field_validator("breaks")
    @classmethod
    def _known_stages(cls, value: list[str]) -> list[str]:
        unknown = [name for name in value if name not in NAMES]
        if unknown:
            raise ValueError(f"unknown stage(s) {', '.join(unknown)}; stages are: {', '.join(NAMES)}")
        return value

    @model_validator(mode="after")
    def _matches_something(self) -> "Entry":
        if not self.ops and not self.kinds:
            raise ValueError("an entry needs ops or kinds, or it would match every finding")
        return self

    def matches(self, finding: Finding) -> bool:
        if finding.stage not in self.breaks or (self.kinds and finding.kind not in self.kinds):
            return False
        if not self.ops:
            return True
        return finding.op is not None and any(finding.op == op or finding.op.startswith(op + ".") for op in self.ops)

    def text(self) -> str:
        """The rewrite as it goes into a finding: the code, then the caveat as a comment."""
        code = self.rewrite.rstrip()
        return f"{code}\n# Caveat: {self.caveat.strip()}" if self.caveat else code


class Catalog:
    def __init__(self, entries: list[Entry]):
        self.entries = entries

    def match(self, finding: Finding) -> Entry | None:
        return next((entry for entry in self.entries if entry.matches(finding)), None)

    def attach(self, findings: list[Finding]) -> list[Finding]:
        """Give every finding without a rewrite the first matching entry's; a finding whose cause is in
        library code gets the advice that fits a library instead: the catalog's code would not fit it."""
        from compatcheck.diagnose.library import advice

        for finding in findings:
            if finding.library_file:
                finding.advice = finding.advice or advice(finding)
                continue
            entry = None if finding.rewrite else self.match(finding)
            if entry is not None:
                finding.rewrite = entry.text()
        return findings


def parse(path: Path) -> list[Entry]:
    """The entries of one catalog file, or a UsageError naming the file and the bad entry."""
    try:
        data = yaml.safe_load(Path(path).read_text())
    except OSError as exc:
        raise UsageError(f"cannot read rewrite catalog {path}: {exc.strerror}") from None
    except yaml.YAMLError as exc:
        raise UsageError(f"rewrite catalog {path} is not valid YAML: {exc}") from None
    if not isinstance(data, list):
        raise UsageError(f"rewrite catalog {path} must be a YAML list of entries")
    entries = []
    for index, item in enumerate(data, 1):
        try:
            entries.append(Entry.model_validate(item))
        except ValidationError as exc:
            first = exc.errors()[0]
            where = ".".join(str(part) for part in first["loc"]) or "entry"
            name = item.get("id") if isinstance(item, dict) else None
            raise UsageError(
                f"rewrite catalog {path}, entry {index}{f' ({name})' if name else ''}: {where}: {first['msg']}"
            ) from None
    ids = [entry.id for entry in entries]
    duplicates = sorted({i for i in ids if ids.count(i) > 1})
    if duplicates:
        raise UsageError(f"rewrite catalog {path}: duplicate id(s) {', '.join(duplicates)}")
    return entries


@functools.lru_cache(maxsize=None)
def load(user_file: str | None = None) -> Catalog:
    """The built-in catalog, with a user's entries first; a user entry replaces a built-in one of the same id."""
    builtin = parse(BUILTIN)
    user = parse(Path(user_file)) if user_file else []
    replaced = {entry.id for entry in user}
    return Catalog(user + [entry for entry in builtin if entry.id not in replaced])


def with_rewrites(miner):
    """Wrap a miner `(stage, ctx, ...) -> findings` so its findings carry the catalog's rewrites."""

    @functools.wraps(miner)
    def wrapped(stage, ctx, *args):
        return load(ctx.options.rewrites).attach(miner(stage, ctx, *args))

    return wrapped
