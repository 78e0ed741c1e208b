"""Run options: parsed by the CLI, sent to the worker as JSON, recorded in the report.

Every value is checked here, where it is defined, so the command line and any other caller refuse
the same things with the same words.
"""

from __future__ import annotations

import math

from pydantic import BaseModel, Field, field_validator

# Past a week a stage is not slow but stuck; longer waits also overflow the OS's timers.
MAX_TIMEOUT_S = 7 * 24 * 3600
# Below this the worker cannot even import torch and onnxruntime (they need ~250 MB of data), let alone run.
MIN_MEMORY_MB = 512
# 2**63 bytes: the most an address-space limit can say.
MAX_MEMORY_MB = 2**43
_UNITS = {"M": 1, "G": 1024, "T": 1024 * 1024}


def megabytes(text: str) -> int:
    """'4G' or '512M' (a bare number is megabytes) as whole megabytes."""
    number, unit = (text[:-1], text[-1].upper()) if text[-1:].upper() in _UNITS else (text, "M")
    try:
        value = float(number)
    except ValueError:
        value = math.nan
    if not math.isfinite(value) or value <= 0:
        raise ValueError(f"must be a positive size like 4G or 512M, got {text!r}")
    mb = value * _UNITS[unit]
    if mb > MAX_MEMORY_MB:
        raise ValueError(f"{text} is more than any machine can address")
    if mb < MIN_MEMORY_MB:
        raise ValueError(f"{text} is too small to load torch and the model; give at least {MIN_MEMORY_MB}M")
    return int(mb)


class RunOptions(BaseModel):
    stages: list[str] = Field(min_length=1, description="stages to run, in ladder order")
    timeout: float = Field(600.0, description="seconds one stage may take")
    atol: float | None = None
    rtol: float | None = None
    onnx_exporter: str = Field("dynamo", pattern="^(dynamo|legacy)$")
    onnx_opset: int | None = Field(None, ge=7)
    compile_backend: str = "inductor"
    diagnose_budget: float | None = Field(
        None, gt=0, description="seconds the search for further graph breaks may take; default: the stage's own time + 10")
    rewrites: str | None = Field(None, description="a user rewrite catalog (YAML), before the built-in one")
    bench_seconds: float | None = Field(None, gt=0, allow_inf_nan=False,
                                        description="with --bench: time budget per artifact and input set")
    memory_limit_mb: int | None = Field(None, ge=MIN_MEMORY_MB, le=MAX_MEMORY_MB,
                                        description="address space a worker may take")
    triton_launcher: str = Field("local", pattern="^(local|docker|url)$")
    triton_url: str | None = None
    triton_image: str = "nvcr.io/nvidia/tritonserver:24.10-py3"

    @field_validator("timeout")
    @classmethod
    def _seconds(cls, value: float) -> float:
        if not (0 < value <= MAX_TIMEOUT_S):  # also false for nan
            raise ValueError(f"must be a number of seconds above 0 and at most {MAX_TIMEOUT_S} (a week), "
                             f"got {value:g}")
        return value

    @field_validator("atol", "rtol")
    @classmethod
    def _tolerance(cls, value: float | None) -> float | None:
        # nan compares false with everything and inf accepts anything: either would pass any mismatch
        if value is not None and not (math.isfinite(value) and value >= 0):
            raise ValueError(f"must be a finite non-negative number, got {value:g}")
        return value

    @field_validator("memory_limit_mb", mode="before")
    @classmethod
    def _size(cls, value):
        return megabytes(value) if isinstance(value, str) else value
