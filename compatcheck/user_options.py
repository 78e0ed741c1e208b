"""The options a user sets for a run, each defined once, in OPTIONS.

`compatcheck run`'s flags (`--onnx-exporter`, `--no-cache` for `cache`), `compatcheck.check()`'s
keyword arguments (same names, same defaults) and the per-model keys of matrix.yaml (the entries
marked `matrix`) are all made from this table, and `parse()` checks them the same way for all
three into the RunOptions the workers get. The table itself imports nothing: the command line
builds its help from it without loading pydantic.
"""

from __future__ import annotations

import functools
from dataclasses import dataclass
from pathlib import Path

from compatcheck.errors import UsageError


@dataclass(frozen=True)
class Option:
    name: str  # the keyword argument and matrix.yaml key; the flag is --name-with-dashes
    type: type  # bool, int, float, str, Path, or list: stage names, comma-separated on the command line
    default: object
    help: str  # for the flag; a bool that defaults to True is the flag --no-NAME, and its help says what that does
    ge: float | None = None
    gt: float | None = None
    choices: tuple[str, ...] = ()
    short: str | None = None
    matrix: bool = False  # a matrix.yaml model may set it: it changes verdicts, not where files go

    @property
    def flag(self) -> str:
        dashed = self.name.replace("_", "-")
        return f"--no-{dashed}" if self.type is bool and self.default else f"--{dashed}"


OPTIONS = (
    Option("stages", list, None, "Stages to run, comma-separated (default: all); the stages they need and eager "
           "run too.", matrix=True),
    Option("skip", list, None, "Stages to leave out, comma-separated."),
    Option("timeout", float, 600.0, "Seconds one stage may take before it is killed.", gt=0, matrix=True),
    Option("atol", float, None, "Absolute tolerance for every float output.", ge=0, matrix=True),
    Option("rtol", float, None, "Relative tolerance for every float output.", ge=0, matrix=True),
    Option("onnx_exporter", str, "dynamo", "torch.onnx.export(dynamo=True), or the TorchScript-based exporter.",
           choices=("dynamo", "legacy"), matrix=True),
    Option("onnx_opset", int, None, "ONNX opset (default: the exporter's).", ge=7, matrix=True),
    Option("compile_backend", str, "inductor", "torch.compile backend.", matrix=True),
    Option("diagnose_budget", float, None, "Seconds the search for further graph breaks may take (default: the "
           "stage's own time + 10); the finding says when the list was cut short.", gt=0, matrix=True),
    Option("rewrites", Path, None, "A YAML rewrite catalog; its entries take precedence over the built-in ones."),
    Option("triton", str, "local", "Server for the triton stage: a local tritonserver binary, the official "
           "Docker image, or a running server at --triton-url.", choices=("local", "docker", "url")),
    Option("triton_url", str, None, "HOST:PORT of a running server's HTTP endpoint (gRPC: the next port, or "
           "HOST:PORT,HOST:PORT), for --triton url."),
    Option("triton_image", str, "nvcr.io/nvidia/tritonserver:24.10-py3", "Image for --triton docker."),
    Option("artifacts", Path, None, "Keep exported files, inputs.npz and a reproduce script per stage here."),
    Option("jobs", int, 1, "Run independent stages in up to N workers side by side.", ge=1, short="-j"),
    Option("memory_limit", str, None, "Memory a worker may allocate, e.g. 4G or 512M; beyond it allocations fail."),
    Option("bench", bool, False, "Time every passing artifact: p50/p95 latency and throughput per input set."),
    Option("bench_seconds", float, 2.0, "Time budget per artifact and input set, with --bench.", gt=0),
    Option("cache", bool, True, "Run every stage even if an identical run's results are cached."),
)
BY_NAME = {option.name: option for option in OPTIONS}


def pydantic_fields(options=OPTIONS, *, all_optional: bool = False, bounds=lambda option: True) -> dict:
    """The options as pydantic fields; `all_optional` makes every default None (an unset override);
    `bounds(option)` says whether its ge/gt limits apply."""
    from typing import Literal, Optional

    from pydantic import Field

    fields = {}
    for option in options:
        annotation = list[str] if option.type is list else option.type
        if option.choices:
            annotation = Literal[option.choices]
        default = None if all_optional else option.default
        if default is None:
            annotation = Optional[annotation]
        limits = {"ge": option.ge, "gt": option.gt} if bounds(option) else {}
        fields[option.name] = (annotation, Field(default, description=option.help, **limits))
    return fields


class _Chosen:
    """Methods of the validated options (the model is built from OPTIONS in _model)."""

    def run_options(self):
        """What the workers get: stages resolved against the ladder, sizes in megabytes."""
        from compatcheck import ladder
        from compatcheck.options import RunOptions

        return RunOptions(
            stages=ladder.select(self.stages, self.skip), timeout=self.timeout, atol=self.atol, rtol=self.rtol,
            onnx_exporter=self.onnx_exporter, onnx_opset=self.onnx_opset, compile_backend=self.compile_backend,
            diagnose_budget=self.diagnose_budget,
            rewrites=str(self.rewrites) if self.rewrites else None,
            memory_limit_mb=self.memory_limit,
            bench_seconds=self.bench_seconds if self.bench else None, triton_launcher=self.triton,
            triton_url=self.triton_url, triton_image=self.triton_image,
        )


@functools.cache
def _model():
    from pydantic import BaseModel, ConfigDict, create_model

    from compatcheck.options import RunOptions

    base = type("ChosenBase", (_Chosen, BaseModel), {"model_config": ConfigDict(extra="forbid")})
    # Values RunOptions holds are checked there, where they are defined, and worded by it.
    unchecked = set(RunOptions.model_fields) | set(_RUN_FIELDS.values())
    return create_model("Chosen", __base__=base, **pydantic_fields(bounds=lambda option: option.name not in unchecked))


# RunOptions fields under another name than the option that sets them
_RUN_FIELDS = {"memory_limit_mb": "memory_limit", "triton_launcher": "triton"}


def _problem(option: Option, error: dict) -> str:
    kind, context = error["type"], error.get("ctx", {})
    if kind in ("greater_than", "greater_than_equal"):
        limit = context.get("gt", context.get("ge"))
        return ("must be non-negative" if kind == "greater_than_equal" and limit == 0 else
                "must be a positive number" if limit == 0 else f"must be at least {limit}" if "ge" in context
                else f"must be greater than {limit}")
    if kind == "literal_error":
        return f"must be {', '.join(option.choices[:-1])} or {option.choices[-1]}"
    return f"must be {_KINDS[option.type]}"


_KINDS = {float: "a number", int: "a whole number", bool: "True or False", str: "a string", Path: "a path",
          list: "a list of stage names"}


def parse(values: dict, *, flags: bool = False):
    """The options, checked; a UsageError names the first bad one (as its --flag when `flags`)."""
    from pydantic import ValidationError

    def shown(option: Option) -> str:
        return option.flag.replace("--no-", "--") if flags else option.name

    unknown = sorted(set(values) - set(BY_NAME))
    if unknown:
        raise UsageError(f"unknown option {unknown[0]!r}; options are: {', '.join(BY_NAME)}")
    try:
        chosen = _model()(**values)
    except ValidationError as exc:
        error = exc.errors()[0]
        option = BY_NAME[str(error["loc"][0])]
        got = error["input"]
        got = f"{got:g}" if isinstance(got, (int, float)) and not isinstance(got, bool) else repr(got)
        raise UsageError(f"{shown(option)} {_problem(option, error)}, got {got}") from None
    if chosen.triton == "url" and not chosen.triton_url:
        raise UsageError("--triton url needs --triton-url HOST:PORT" if flags else "triton='url' needs triton_url")
    if chosen.rewrites is not None:
        from compatcheck.diagnose.catalog import load

        chosen.rewrites = chosen.rewrites.resolve()
        load(str(chosen.rewrites))  # a bad file is a usage error now, not a failed diagnosis later
    try:
        chosen.run_options()  # unknown stage names and values RunOptions refuses fail here, before anything runs
    except ValidationError as exc:
        error = exc.errors()[0]
        field = str(error["loc"][0]) if error["loc"] else ""
        option = BY_NAME.get(_RUN_FIELDS.get(field, field))
        name = shown(option) if option else field
        if error["type"] == "value_error":  # RunOptions' own validators name the value themselves
            raise UsageError(f"{name}: {error['msg'].removeprefix('Value error, ')}") from None
        given = error.get("input")
        given = f" {given:g}" if isinstance(given, float) else f" {given}" if isinstance(given, (int, str)) else ""
        raise UsageError(f"{name}{given}: {error['msg']}") from None
    return chosen
