"""matrix.yaml: which environments, which models, which baseline. Errors name the key and its line."""

from __future__ import annotations

import re
from pathlib import Path

import yaml
from pydantic import BaseModel, ConfigDict, Field, ValidationError, create_model, field_validator

from compatcheck import ladder
from compatcheck.errors import UsageError
from compatcheck.files import read_yaml_text
from compatcheck.options import at, pydantic_fields
from compatcheck.target import parse_target

NAME = r"^[A-Za-z0-9][A-Za-z0-9._-]*$"  # environment and model names end up in file names
REQUIREMENT = re.compile(r"^\s*([A-Za-z0-9][A-Za-z0-9._-]*)")


def package_name(requirement: str) -> str:
    """'Torch[extra]==2.13.0' -> 'torch', normalised as package indexes compare names."""
    match = REQUIREMENT.match(requirement)
    return re.sub(r"[-_.]+", "-", match.group(1)).lower() if match else ""


class _Strict(BaseModel):
    model_config = ConfigDict(extra="forbid")


def _not_an_option(value: str | None) -> str | None:
    # The installer gets it as the argument of --index-url or --find-links: one starting with '-' would be
    # read as an option of its own.
    if value is not None and value.lstrip().startswith("-"):
        raise ValueError(f"{value!r} starts with '-': give a URL or a path, not an installer option")
    return value


class Environment(_Strict):
    requirements: list[str] = Field(default_factory=list, description="pip requirements, e.g. torch==2.13.0")
    index_url: str | None = None
    extra_index_urls: list[str] = Field(default_factory=list)
    find_links: list[str] = Field(default_factory=list)
    pre: bool = Field(False, description="allow pre-releases, as nightlies need")
    python: str | None = Field(None, description="interpreter to build the environment with (default: this one)")
    refresh_after: float = Field(20.0, gt=0, description="hours after which an environment whose requirements are "
                                                         "not all pinned is resolved again (nightlies: last night's)")
    optional: bool = Field(False, description="where its index cannot be reached, report the environment as "
                                              "unavailable instead of failing (a nightly index off this network)")

    @field_validator("index_url")
    @classmethod
    def _index_url(cls, value: str | None) -> str | None:
        return _not_an_option(value)

    @field_validator("extra_index_urls", "find_links")
    @classmethod
    def _locations(cls, value: list[str]) -> list[str]:
        return [_not_an_option(item) for item in value]

    @field_validator("requirements")
    @classmethod
    def _requirements(cls, value: list[str]) -> list[str]:
        for requirement in value:
            if not package_name(requirement):
                raise ValueError(f"{requirement!r} is not a requirement such as 'torch==2.13.0'; "
                                 "put index options in index_url, extra_index_urls or find_links")
        return value


def _known_stages(cls, value: list[str] | None) -> list[str] | None:
    for name in value or []:
        if name not in ladder.BY_NAME:
            raise ValueError(f"unknown stage {name!r}; stages are: {', '.join(ladder.NAMES)}")
    return value


# What `compatcheck run` gets for one model, set for all models and overridden per model: the
# options of the table (options.py) that reach the matrix door, unset (None) unless matrix.yaml gives them.
RunSettings = create_model(
    "RunSettings", __base__=_Strict, __validators__={"_stages": field_validator("stages")(_known_stages)},
    **pydantic_fields(at("matrix"), all_optional=True),
)


class ModelEntry(RunSettings):
    path: str = Field(description="PATH[:FACTORY], relative to matrix.yaml")
    name: str | None = Field(None, pattern=NAME)


class Models(RunSettings):
    paths: list[ModelEntry] = Field(min_length=1)

    @field_validator("paths", mode="before")
    @classmethod
    def _plain_paths(cls, value):
        # A bare string is the common case: a path with no overrides.
        if not isinstance(value, list):
            return value
        return [{"path": item} if isinstance(item, str) else item for item in value]

    @field_validator("paths")
    @classmethod
    def _unique(cls, value: list[ModelEntry]) -> list[ModelEntry]:
        seen = set()
        for name in (model_name(entry) for entry in value):
            if name in seen:
                raise ValueError(f"two models are named {name!r}; give one a `name`")
            seen.add(name)
        return value


class Matrix(_Strict):
    environments: dict[str, Environment] = Field(min_length=1)
    models: Models
    baseline: str | None = Field(None, description="expected-results file, relative to matrix.yaml")

    @field_validator("environments")
    @classmethod
    def _names(cls, value: dict[str, Environment]) -> dict[str, Environment]:
        for name in value:
            if not re.match(NAME, str(name)):
                raise ValueError(f"environment name {name!r} may hold only letters, digits, '.', '_' and '-'")
        return value


def model_name(entry: ModelEntry) -> str:
    if entry.name:
        return entry.name
    path, factory = parse_target(entry.path)
    return path.stem if factory == "get_model" else f"{path.stem}-{factory}"


def settings(models: Models, entry: ModelEntry) -> RunSettings:
    """The model's own settings over the ones for all models."""
    merged = {name: getattr(models, name) for name in RunSettings.model_fields}
    merged.update({name: getattr(entry, name) for name in entry.model_fields_set if name in RunSettings.model_fields})
    return RunSettings(**merged)


def _lines(node: yaml.Node, path: tuple = ()) -> dict[tuple, int]:
    """Every key path in the document -> its 1-based line, from the composed node tree."""
    found = {path: node.start_mark.line + 1}
    if isinstance(node, yaml.MappingNode):
        for key, value in node.value:
            found.update(_lines(value, path + (key.value,)))
            found[path + (key.value,)] = key.start_mark.line + 1
    elif isinstance(node, yaml.SequenceNode):
        for index, item in enumerate(node.value):
            found.update(_lines(item, path + (index,)))
    return found


def _dotted(loc: tuple) -> str:
    text = ""
    for part in loc:
        text += f"[{part}]" if isinstance(part, int) else (f".{part}" if text else str(part))
    return text


def _refuse_aliases(text: str, path: Path) -> None:
    """An alias (*name) repeats a node wherever it is used: a few lines of them expand to gigabytes. They are
    refused from the parser's events, before anything expands them."""
    for event in yaml.parse(text, Loader=yaml.SafeLoader):
        if isinstance(event, yaml.AliasEvent):
            raise UsageError(f"{path}:{event.start_mark.line + 1}: YAML aliases (*{event.anchor}) are not allowed "
                             "in a matrix file: write the value out")


def _refuse_duplicate_keys(node: yaml.Node, path: Path) -> None:
    """YAML keeps the last of two equal keys; a matrix file that says a thing twice is refused instead."""
    todo = [node]
    while todo:
        node = todo.pop()
        if isinstance(node, yaml.MappingNode):
            seen = set()
            for key, value in node.value:
                if isinstance(key, yaml.ScalarNode):
                    if key.value in seen:
                        raise UsageError(f"{path}:{key.start_mark.line + 1}: duplicate key {key.value!r}")
                    seen.add(key.value)
                todo.append(value)
        elif isinstance(node, yaml.SequenceNode):
            todo.extend(node.value)


def load(path: Path) -> Matrix:
    path = Path(path)
    try:
        text = read_yaml_text(path)
    except OSError as exc:
        raise UsageError(f"cannot read matrix file {path}: {exc.strerror}") from None
    except ValueError as exc:
        raise UsageError(f"cannot read matrix file {path}: {exc}") from None
    try:
        _refuse_aliases(text, path)
        node = yaml.compose(text, Loader=yaml.SafeLoader)
        if node is not None:
            _refuse_duplicate_keys(node, path)
        data = yaml.safe_load(text)
    except yaml.YAMLError as exc:
        mark = getattr(exc, "problem_mark", None)
        where = f":{mark.line + 1}" if mark else ""
        raise UsageError(f"{path}{where}: not valid YAML: {getattr(exc, 'problem', exc)}") from None
    except RecursionError:
        raise UsageError(f"{path}: nested too deeply to be a matrix file") from None
    if not isinstance(data, dict):
        raise UsageError(f"{path}: expected a mapping with environments, models and baseline")
    try:
        return Matrix.model_validate(data)
    except ValidationError as exc:
        lines = _lines(node)
        messages = []
        for error in exc.errors():
            keys = tuple(error["loc"])
            known = next(keys[:n] for n in range(len(keys), -1, -1) if keys[:n] in lines)
            message = error["msg"].removeprefix("Value error, ")
            if error["type"] == "extra_forbidden":
                message = f"unknown key {keys[-1]!r}"
            elif error["type"] == "missing":
                message = f"missing key {keys[-1]!r}"
            messages.append(f"{path}:{lines[known]}: {_dotted(keys) or '(top level)'}: {message}")
        raise UsageError("\n".join(messages)) from None
