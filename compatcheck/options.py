"""Every option a user sets, defined once: one row of OPTIONS each.

A row says what the option is (type, default, bounds, choices, the check of its value, help) and
which doors it reaches:
- `cli`: a flag of `compatcheck run`, and of the other commands its `commands` name;
- `api`: a keyword argument of `compatcheck.check()` and `assert_deployable()`;
- `matrix`: a key of matrix.yaml, for all models and per model;
- `pytest`: the plugin's `--compatcheck-option NAME=VALUE`;
- `worker`: a field of RunOptions, what the workers get and the report records;
and `cache_key`: whether its value is part of the result cache's key. The flags, the keyword
arguments, the matrix.yaml keys, RunOptions and the cache key are all generated from the rows, and
`parse()` checks every value the same way for every door.

The table imports nothing: `compatcheck --help` builds from it without pydantic or torch. The
pydantic models are made from it on first use (`RunOptions` is one, importable by name).
"""

from __future__ import annotations

import functools
import math
from dataclasses import dataclass
from pathlib import Path
from typing import Callable

from compatcheck.errors import UsageError

DOORS = ("cli", "api", "matrix", "pytest", "worker")

# Past a week a stage is not slow but stuck; longer waits also overflow the OS's timers.
MAX_TIMEOUT_S = 7 * 24 * 3600
# Below this the worker cannot even import torch and onnxruntime (they need ~250 MB of data), let alone run.
MIN_MEMORY_MB = 512
# 2**63 bytes: the most an address-space limit can say.
MAX_MEMORY_MB = 2**43
_UNITS = {"M": 1, "G": 1024, "T": 1024 * 1024}


def megabytes(value):
    """'4G' or '512M' (a bare number is megabytes) as whole megabytes; a number is megabytes already."""
    if not isinstance(value, str):
        return value
    number, unit = (value[:-1], value[-1].upper()) if value[-1:].upper() in _UNITS else (value, "M")
    try:
        size = float(number)
    except ValueError:
        size = math.nan
    if not math.isfinite(size) or size <= 0:
        raise ValueError(f"must be a positive size like 4G or 512M, got {value!r}")
    mb = size * _UNITS[unit]
    if mb > MAX_MEMORY_MB:
        raise ValueError(f"{value} is more than any machine can address")
    if mb < MIN_MEMORY_MB:
        raise ValueError(f"{value} is too small to load torch and the model; give at least {MIN_MEMORY_MB}M")
    return int(mb)


def _seconds(value: float) -> float:
    if not (0 < value <= MAX_TIMEOUT_S):  # also false for nan
        raise ValueError(f"must be a number of seconds above 0 and at most {MAX_TIMEOUT_S} (a week), got {value:g}")
    return value


def _tolerance(value: float | None) -> float | None:
    # nan compares false with everything and inf accepts anything: either would pass any mismatch
    if value is not None and not (math.isfinite(value) and value >= 0):
        raise ValueError(f"must be a finite non-negative number, got {value:g}")
    return value


def _finite(value: float | None) -> float | None:
    if value is not None and not math.isfinite(value):
        raise ValueError(f"must be a finite number of seconds, got {value:g}")
    return value


def _milliseconds(value: float) -> float:
    if not math.isfinite(value):
        raise ValueError(f"must be a finite number of milliseconds, got {value:g}")
    return value


@dataclass(frozen=True)
class Option:
    name: str  # the keyword argument, matrix.yaml key and RunOptions field; the flag is --name-with-dashes
    type: type  # bool, int, float, str, Path, or list: stage names, comma-separated on the command line
    default: object
    help: str  # for the flag; a bool that defaults to True is the flag --no-NAME, and its help says what that does
    doors: tuple[str, ...] = ("cli", "api", "pytest")
    cache_key: bool = False  # its value can change a verdict or finding that the cache would serve
    ge: float | None = None
    gt: float | None = None
    choices: tuple[str, ...] = ()
    check: Callable | None = None  # the value -> the value kept; raises ValueError with the words to show
    short: str | None = None
    metavar: str | None = None
    commands: tuple[str, ...] = ("run",)  # the CLI commands that take the flag
    repeat: bool = False  # a list given by repeating the flag, not comma-separated

    @property
    def flag(self) -> str:
        dashed = self.name.replace("_", "-")
        return f"--no-{dashed}" if self.type is bool and self.default else f"--{dashed}"


_VERDICT = ("cli", "api", "pytest", "matrix", "worker")  # an option that can change what a stage concludes

OPTIONS = (
    Option("stages", list, None, "Stages to run, comma-separated (default: all); the stages they need and eager "
           "run too.", doors=_VERDICT),
    Option("skip", list, None, "Stages to leave out, comma-separated."),
    Option("timeout", float, 600.0, "Seconds one stage may take before it is killed.", doors=_VERDICT,
           check=_seconds, commands=("run", "triton-repo")),
    Option("atol", float, None, "Absolute tolerance for every float output.", doors=_VERDICT, cache_key=True,
           check=_tolerance),
    Option("rtol", float, None, "Relative tolerance for every float output.", doors=_VERDICT, cache_key=True,
           check=_tolerance),
    Option("onnx_exporter", str, "dynamo", "torch.onnx.export(dynamo=True), or the TorchScript-based exporter.",
           doors=_VERDICT, cache_key=True, choices=("dynamo", "legacy")),
    Option("onnx_opset", int, None, "ONNX opset (default: the exporter's).", doors=_VERDICT, cache_key=True, ge=7),
    Option("compile_backend", str, "inductor", "torch.compile backend.", doors=_VERDICT, cache_key=True),
    Option("dtype", str, "float32", "Precision to judge the model in: float16 and bfloat16 cast its floating "
           "parameters, buffers and inputs (model.to(dtype); integer and bool inputs stay), judge every stage "
           "against a float64 run, and check the activations against the dtype's range first.", doors=_VERDICT, cache_key=True,
           choices=("float32", "float16", "bfloat16")),
    Option("device", str, "cpu", "Where the model is deployed: the model and inputs moved there for the torch stages, "
           "onnxruntime's CUDA (and TensorRT) execution provider, Triton's GPU instances. cuda needs a GPU here.",
           doors=_VERDICT, cache_key=True, choices=("cpu", "cuda"), commands=("run", "triton-repo")),
    Option("diagnose_budget", float, None, "Seconds the search for further graph breaks may take (default: the "
           "stage's own time + 10); the finding says when the list was cut short.", doors=_VERDICT, cache_key=True,
           gt=0, check=_finite),
    Option("sweep", str, "on", "Also run every artifact at sizes the input sets lack: batch 1, an odd batch above "
           "them, a length shorter and one longer (up to the cap eager takes); off: the input sets only.",
           doors=_VERDICT, cache_key=True, choices=("on", "off")),
    Option("sweep_budget", float, 30.0, "Seconds the sweep may take to make its input sets (eager at each size, "
           "and the search for a length cap); the report says when it was cut short.", doors=_VERDICT,
           cache_key=True, gt=0, check=_finite),
    Option("user_packages", list, None, "Installed packages whose code is yours, comma-separated: findings point "
           "into them as into your model file. Without it, every installed package but torch's machinery and the "
           "libraries models are built with (transformers, timm, ...) is taken as yours.", doors=_VERDICT,
           cache_key=True),
    Option("rewrites", Path, None, "A YAML rewrite catalog; its entries take precedence over the built-in ones.",
           doors=("cli", "api", "pytest", "worker"), cache_key=True),
    Option("triton", str, "local", "Server for the triton stage: a local tritonserver binary, the official "
           "Docker image, or a running server at --triton-url.", doors=("cli", "api", "pytest", "worker"),
           cache_key=True, choices=("local", "docker", "url")),
    Option("triton_url", str, None, "HOST:PORT of a running server's HTTP endpoint (gRPC: the next port, or "
           "HOST:PORT,HOST:PORT), for --triton url.", doors=("cli", "api", "pytest", "worker"), cache_key=True),
    Option("triton_image", str, "nvcr.io/nvidia/tritonserver:24.10-py3", "Image for --triton docker.",
           doors=("cli", "api", "pytest", "worker"), cache_key=True),
    Option("triton_queue_delay", float, 100.0, "Milliseconds the dynamic batcher waits for more requests to batch "
           "(max_queue_delay_microseconds in config.pbtxt), so the triton stage's concurrent requests really share "
           "batches; 0 batches only what is already queued.", doors=("cli", "api", "pytest", "worker"),
           cache_key=True, ge=0, check=_milliseconds, metavar="MS", commands=("run", "triton-repo")),
    Option("artifacts", Path, None, "Keep exported files, inputs.npz and a reproduce script per stage here."),
    Option("jobs", int, None, "Run independent stages in up to N workers side by side (default: one per 4 cores); "
           "never more than free memory holds.", ge=1, short="-j"),
    Option("memory_limit", str, None, "Memory a worker may allocate, e.g. 4G or 512M; beyond it allocations fail.",
           doors=("cli", "api", "pytest", "worker"), cache_key=True, check=megabytes, metavar="SIZE"),
    Option("bench", bool, False, "Time every passing artifact: p50/p95 latency and throughput per input set.",
           doors=("cli", "api", "pytest", "worker")),
    Option("bench_seconds", float, 2.0, "Time budget per artifact and input set, with --bench.",
           doors=("cli", "api", "pytest", "worker"), gt=0, check=_finite),
    Option("cache", bool, True, "Run every stage even if an identical run's results are cached."),
)


def by_name() -> dict[str, Option]:
    return {option.name: option for option in OPTIONS}


def at(door: str) -> tuple[Option, ...]:
    """The options that reach `door` (one of DOORS), in table order."""
    return tuple(option for option in OPTIONS if door in option.doors)


def from_text(option: Option, text: str):
    """A value written as text (pytest's --compatcheck-option NAME=VALUE), for parse() to check."""
    if option.type is list:
        return [name.strip() for name in text.split(",") if name.strip()]
    return text.strip()


def pydantic_fields(options, *, all_optional: bool = False) -> dict:
    """The options as pydantic fields; `all_optional` makes every default None (an unset override)."""
    from typing import Annotated, Literal, Optional

    from pydantic import BeforeValidator, Field

    fields = {}
    for option in options:
        annotation = list[str] if option.type is list else option.type
        if option.choices:
            annotation = Literal[option.choices]
        default = None if all_optional else option.default
        if default is None:
            annotation = Optional[annotation]
        if option.check is megabytes:  # a size is written as text ('4G') and kept as whole megabytes
            annotation = Annotated[Optional[int], BeforeValidator(megabytes)]
        elif option.check is not None:
            annotation = Annotated[annotation, _after(option.check)]
        fields[option.name] = (annotation, Field(default, description=option.help, ge=option.ge, gt=option.gt))
    return fields


def _after(check: Callable):
    from pydantic import AfterValidator

    return AfterValidator(lambda value: value if value is None else check(value))


class _Stages:
    """Shared by the models made from the table: `stages` resolved against the ladder (the stages they
    need and eager added, `skip` taken out), in ladder order."""

    def _resolve_stages(self):
        from compatcheck import ladder

        self.stages = ladder.select(self.stages, getattr(self, "skip", None))
        return self


class _Chosen(_Stages):
    def run_options(self):
        """What the workers get: the worker door's options."""
        return run_options_model()(**{option.name: getattr(self, option.name) for option in at("worker")})


@functools.cache
def _models(table: tuple[Option, ...]):
    from pydantic import BaseModel, ConfigDict, create_model, model_validator

    def model(name: str, mixin, options, doc: str):
        base = type(f"{name}Base", (mixin, BaseModel), {
            "model_config": ConfigDict(extra="forbid"), "__doc__": doc,
            "_stages": model_validator(mode="after")(_Stages._resolve_stages)})
        return create_model(name, __base__=base, **pydantic_fields(options))

    chosen = model("Chosen", _Chosen, table, "Every option of one run, checked.")
    run = model("RunOptions", _Stages, [o for o in table if "worker" in o.doors],
                "What the workers get and the report records: the options marked for the worker door.")
    return chosen, run


def run_options_model():
    return _models(OPTIONS)[1]


def __getattr__(name: str):
    if name == "RunOptions":
        return run_options_model()
    raise AttributeError(f"module 'compatcheck.options' has no attribute {name!r}")


def cache_key_values(run_options) -> dict:
    """The values of the options marked `cache_key`, as the result cache's key hashes them."""
    values = run_options.model_dump(mode="json")
    return {option.name: values[option.name] for option in OPTIONS if option.cache_key}


def _problem(option: Option, error: dict) -> str:
    kind, context = error["type"], error.get("ctx", {})
    if kind in ("greater_than", "greater_than_equal"):
        limit = context.get("gt", context.get("ge"))
        return ("must be non-negative" if kind == "greater_than_equal" and limit == 0 else
                "must be a positive number" if limit == 0 else f"must be at least {limit}" if "ge" in context
                else f"must be greater than {limit}")
    if kind == "literal_error":
        return f"must be {', '.join(option.choices[:-1])} or {option.choices[-1]}"
    if kind == "value_error":  # the row's own check names the value itself
        return ": " + error["msg"].removeprefix("Value error, ")
    return f"must be {_KINDS[option.type]}"


_KINDS = {float: "a number", int: "a whole number", bool: "True or False", str: "a string", Path: "a path",
          list: "a list of names"}


def parse(values: dict, *, flags: bool = False, door: str = "api"):
    """The options, checked; a UsageError names the first bad one (as its --flag when `flags`)."""
    from pydantic import ValidationError

    known = {option.name: option for option in at(door)} if door != "cli" else by_name()
    unknown = sorted(set(values) - set(known))
    if unknown:
        raise UsageError(f"unknown option {unknown[0]!r}; options are: {', '.join(known)}")
    try:
        chosen = _models(OPTIONS)[0](**values)
    except ValidationError as exc:
        error = exc.errors()[0]
        option = by_name()[str(error["loc"][0])]
        shown = option.flag.replace("--no-", "--") if flags else option.name
        got = error["input"]
        got = f"{got:g}" if isinstance(got, (int, float)) and not isinstance(got, bool) else repr(got)
        problem = _problem(option, error)
        raise UsageError(f"{shown}{problem}" if problem.startswith(":") else f"{shown} {problem}, got {got}") from None
    if chosen.triton == "url" and not chosen.triton_url:
        raise UsageError("--triton url needs --triton-url HOST:PORT" if flags else "triton='url' needs triton_url")
    if chosen.rewrites is not None:
        chosen.rewrites = chosen.rewrites.resolve()
    return chosen


REQUIRED = ...  # the default of a flag that must be given

# The flags of the commands themselves: where a command's output goes and how it runs, not what a
# stage concludes. They reach the command line only.
COMMAND_FLAGS = (
    Option("version", bool, False, "Print the version.", doors=("cli",), commands=("compatcheck",)),
    Option("json", Path, None, "Write the JSON report here.", doors=("cli",)),
    Option("markdown", Path, None, "Write the Markdown checklist here.", doors=("cli",)),
    Option("junit", Path, None, "Write JUnit XML here: one test case per stage, the findings in the failure text.",
           doors=("cli",)),
    Option("annotations", str, None, "Print each finding as a CI annotation on the user's line: github.",
           doors=("cli",), choices=("github",)),
    Option("resume", bool, False, "Keep the verdicts of the --json report an interrupted run left; run the rest.",
           doors=("cli",)),
    Option("quiet", bool, False, "No progress, only the table.", doors=("cli",), short="-q"),
    Option("write", bool, False, "Apply the offered rewrite to the model file in place: the proven rewrites "
           "together where that was proven too, else the first proven one.", doors=("cli",), commands=("fix",)),
    Option("output", Path, None, "Write here instead of stdout.", doors=("cli",), short="-o",
           commands=("checklist",)),
    Option("output", Path, REQUIRED, "The repository folder to write (new or empty).", doors=("cli",), short="-o",
           commands=("triton-repo",)),
    Option("triton_backend", str, "native", "native: onnxruntime and pytorch backends, as in the official image; "
           "python: Python-backend models that run the same files with onnxruntime or torch from the server's "
           "Python.", doors=("cli",), choices=("native", "python"), commands=("triton-repo",)),
    Option("jobs", int, None, "Cells to run side by side (default: one per CPU).", doors=("cli",), ge=1, short="-j",
           commands=("matrix",)),
    Option("resume", bool, False, "Keep the cells a previous run into --out finished.", doors=("cli",),
           commands=("matrix",)),
    Option("strict", bool, False, "Fail also on missing cells or stages.", doors=("cli",),
           commands=("matrix", "merge")),
    Option("update_baseline", bool, False, "Rewrite the baseline from this run.", doors=("cli",),
           commands=("matrix",)),
    Option("out", Path, Path("matrix-out"), "Folder for cell files, logs and merged reports.", doors=("cli",),
           commands=("matrix",)),
    Option("env_dir", Path, None, "Where environments are built and kept (default ~/.cache/compatcheck/envs).",
           doors=("cli",), commands=("matrix",)),
    Option("cell", list, None, "Run only this ENVIRONMENT/MODEL cell; repeatable.", doors=("cli",),
           commands=("matrix",), metavar="ENVIRONMENT/MODEL", repeat=True),
    Option("emit", str, None, "Print the cells for a CI system instead: github.", doors=("cli",), choices=("github",),
           commands=("matrix",)),
    Option("refresh_envs", bool, False, "Build every environment again now (unpinned ones are re-resolved anyway "
           "once older than their refresh_after).", doors=("cli",), commands=("matrix",)),
    Option("build_only", bool, False, "Build or reuse the environments the cells need, run no cell, and exit 1 if "
           "a required one fails (a matrix run started meanwhile waits for each build and reuses it).",
           doors=("cli",), commands=("matrix",)),
    Option("baseline", Path, None, "Expected results to gate on.", doors=("cli",), commands=("merge",)),
    Option("out", Path, Path("matrix-out"), "Folder for the merged reports.", doors=("cli",), commands=("merge",)),
)


# `compatcheck fix` runs the ladder as `run` does, so it takes run's flags, but none that resumes a run or
# writes for CI: what it writes is the rewritten model file.
_NOT_FOR_FIX = ("resume", "markdown", "junit", "annotations")


def flags_of(command: str) -> tuple[Option, ...]:
    """The flags of one command, in the order its help lists them: the run options first."""
    def takes(option: Option) -> bool:
        return command in option.commands or (command == "fix" and "run" in option.commands
                                              and option.name not in _NOT_FOR_FIX)

    return tuple(option for option in (*at("cli"), *COMMAND_FLAGS) if takes(option))
