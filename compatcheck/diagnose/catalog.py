"""The rewrite catalog: what to write instead of an op or construct that blocks a target.

The built-in catalog is rewrites.yaml beside this file; `--rewrites FILE` adds entries (same
format) that take precedence, and replace built-in entries with the same id. Imports no torch,
so the CLI can validate a user's file before starting the worker.
"""

from __future__ import annotations

import functools
import re
from pathlib import Path

import yaml
from pydantic import BaseModel, ConfigDict, Field, ValidationError, field_validator, model_validator

from compatcheck.errors import UsageError
from compatcheck.files import read_yaml_text
from compatcheck.report.model import Finding
from compatcheck.ladder import NAMES

BUILTIN = Path(__file__).with_name("rewrites.yaml")


def _known(stages: list[str]) -> list[str]:
    unknown = [name for name in stages if name not in NAMES]
    if unknown:
        raise ValueError(f"unknown stage(s) {', '.join(unknown)}; stages are: {', '.join(NAMES)}")
    return stages


class Entry(BaseModel):
    model_config = ConfigDict(extra="forbid")

    id: str = Field(pattern=r"^[a-z0-9][a-z0-9-]*$")
    title: str
    ops: list[str] = Field([], description="finding ops it covers; 'aten.median' also covers 'aten.median.dim'")
    kinds: list[str] = Field([], description="finding kinds it covers; empty: any kind of a listed op")
    breaks: list[str] = Field(min_length=1, description="the stages (targets) it blocks or miscomputes")
    why: str
    code: str | None = Field(None, description="a regex the finding's source line must match for the entry to "
                                               "apply; its named groups fill {name} in the rewrite, so the "
                                               "rewrite is made from the user's own line")
    rewrite: str = Field(min_length=1, description="the replacement, as code")
    caveat: str | None = Field(None, description="numerical or semantic difference of the rewrite")
    codemod: str | None = Field(None, description="a built-in codemod (compatcheck/codemods) that makes the "
                                                  "rewrite on the user's source, for `compatcheck fix` to prove")
    status: str | None = Field(None, description="where it stands with today's versions, e.g. passes every stage")

    @field_validator("breaks")
    @classmethod
    def _known_stages(cls, value: list[str]) -> list[str]:
        return _known(value)

    @field_validator("codemod")
    @classmethod
    def _known_codemod(cls, value: str | None) -> str | None:
        from compatcheck.codemods import CODEMODS

        if value is not None and value not in CODEMODS:
            raise ValueError(f"unknown codemod {value}; codemods are: {', '.join(CODEMODS)}")
        return value

    @model_validator(mode="after")
    def _matches_something(self) -> "Entry":
        if not self.ops and not self.kinds:
            raise ValueError("an entry needs ops or kinds, or it would match every finding")
        if self.code is not None:
            try:
                pattern = re.compile(self.code)
            except re.error as exc:
                raise ValueError(f"code is not a valid regex: {exc}") from None
            missing = set(re.findall(r"{(\w+)}", self.rewrite)) - set(pattern.groupindex)
            if missing:
                raise ValueError(f"the rewrite names {', '.join(sorted(missing))}, which code does not capture")
        return self

    def matches(self, finding: Finding) -> bool:
        if finding.stage not in self.breaks or (self.kinds and finding.kind not in self.kinds):
            return False
        if self.code is not None and not re.search(self.code, finding.code or ""):
            return False  # the template is made for another construct than the one on this line
        if not self.ops:
            return True
        return finding.op is not None and any(finding.op == op or finding.op.startswith(op + ".") for op in self.ops)

    def text(self, finding: Finding | None = None) -> str:
        """The rewrite as it goes into a finding, filled from its line where the entry captures parts of
        it: the code, then the caveat as a comment."""
        code = self.rewrite.rstrip()
        if self.code is not None and finding is not None:
            found = re.search(self.code, finding.code or "")
            code = re.sub(r"{(\w+)}", lambda m: (found.group(m.group(1)) or "") if found else m.group(0), code)
        return f"{code}\n# Caveat: {self.caveat.strip()}" if self.caveat else code


class Setting(BaseModel):
    """Something set on the built model, from a fixed vocabulary: a method the library offers, called
    with `args`, or an attribute at a dotted `path` (read at forward time) given `value`. Applied to
    the first module of the model that has it."""

    model_config = ConfigDict(extra="forbid")

    call: str | None = Field(None, pattern=r"^[A-Za-z_]\w*$", description="a method of the library's model")
    args: list[str | int | float | bool | None] = []
    attribute: str | None = Field(None, pattern=r"^[A-Za-z_]\w*(\.[A-Za-z_]\w*)*$")
    value: str | int | float | bool | None = None

    @model_validator(mode="after")
    def _one(self) -> "Setting":
        if (self.call is None) == (self.attribute is None):
            raise ValueError("a setting is a call or an attribute, one of the two")
        return self


class RecipeEntry(BaseModel):
    """Another way to build a stage, offered where a finding's cause lies in a library's code: proven by
    running it before it is offered, never executed as code (a fixed vocabulary of settings)."""

    model_config = ConfigDict(extra="forbid")

    id: str = Field(pattern=r"^[a-z0-9][a-z0-9-]*$")
    title: str
    library: str = Field(description="the package whose frame the finding points into, e.g. transformers")
    words: list[str] = Field(min_length=1, description="one of them must be in the finding's library file, "
                                                       "library line, op or message")
    stages: list[str] = Field(min_length=1)
    setting: Setting | None = None
    exporter: dict[str, bool | int | str] = Field({}, description="keywords of the stage's export call")
    factory: str | None = Field(None, description="the argument that does it at construction, in get_model()")

    @field_validator("stages")
    @classmethod
    def _known_stages(cls, value: list[str]) -> list[str]:
        return _known(value)

    @model_validator(mode="after")
    def _does_something(self) -> "RecipeEntry":
        if self.setting is None and not self.exporter:
            raise ValueError("a recipe needs a setting or exporter keywords")
        return self

    def matches(self, finding: Finding) -> bool:
        if finding.stage not in self.stages or not (finding.library_file or "").startswith(self.library + "/"):
            return False
        evidence = " ".join(filter(None, (finding.library_file, finding.library_code, finding.op, finding.message)))
        return any(word in evidence for word in self.words)


class Catalog:
    def __init__(self, entries: list[Entry], recipes: list[RecipeEntry] = ()):
        self.entries = entries
        self.recipes = list(recipes)

    def recipes_for(self, findings: list[Finding]) -> list[RecipeEntry]:
        """The recipes whose library and words a finding of the stage matches, each once."""
        return [recipe for recipe in self.recipes if any(recipe.matches(finding) for finding in findings)]

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
                finding.rewrite = entry.text(finding)
        return findings


def parse(path: Path) -> list[Entry | RecipeEntry]:
    """The entries of one catalog file (rewrites, and recipes: those with a `library`), or a UsageError
    naming the file and the bad entry."""
    try:
        data = yaml.safe_load(read_yaml_text(Path(path)))
    except OSError as exc:
        raise UsageError(f"cannot read rewrite catalog {path}: {exc.strerror}") from None
    except ValueError as exc:
        raise UsageError(f"cannot read rewrite catalog {path}: {exc}") from None
    except yaml.YAMLError as exc:
        raise UsageError(f"rewrite catalog {path} is not valid YAML: {exc}") from None
    if not isinstance(data, list):
        raise UsageError(f"rewrite catalog {path} must be a YAML list of entries")
    entries = []
    for index, item in enumerate(data, 1):
        try:
            kind = RecipeEntry if isinstance(item, dict) and "library" in item else Entry
            entries.append(kind.model_validate(item))
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
    entries = user + [entry for entry in builtin if entry.id not in replaced]
    return Catalog([e for e in entries if isinstance(e, Entry)], [e for e in entries if isinstance(e, RecipeEntry)])


def told_carried(ctx, findings: list[Finding]) -> list[Finding]:
    """Each finding of a `for` loop over a dynamic dimension whose loop carries state from step to step,
    marked so (its own catalog entry: no batching rewrite fits it). A loop whose count is a tensor's value
    keeps its op: its rewrite (a fixed maximum of masked steps) fits a carried loop too."""
    from compatcheck.diagnose.loops import CARRIED, carried_names

    for finding in findings:
        if finding.op == "for" and finding.kind == "dynamic-shape" and finding.file:
            names = carried_names(str(ctx.spec.user.root / finding.file), finding.line)
            if names:
                finding.op = CARRIED
                finding.message = finding.message.rstrip(". ") + f". Each step reads what the step before wrote ({', '.join(names)})."
    return findings


def with_rewrites(miner):
    """Wrap a miner `(stage, ctx, ...) -> findings` so its findings carry the catalog's rewrites."""

    @functools.wraps(miner)
    def wrapped(stage, ctx, *args, **keywords):
        return load(ctx.options.rewrites).attach(told_carried(ctx, miner(stage, ctx, *args, **keywords)))

    return wrapped
