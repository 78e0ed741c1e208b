"""Run options: parsed by the CLI, sent to the worker as JSON, recorded in the report."""

from __future__ import annotations

from pydantic import BaseModel, Field


class RunOptions(BaseModel):
    stages: list[str] = Field(description="stages to run, in ladder order")
    timeout: float = Field(600.0, gt=0, description="seconds one stage may take")
    atol: float | None = Field(None, ge=0)
    rtol: float | None = Field(None, ge=0)
    onnx_exporter: str = Field("dynamo", pattern="^(dynamo|legacy)$")
    onnx_opset: int | None = Field(None, ge=7)
    compile_backend: str = "inductor"
    rewrites: str | None = Field(None, description="a user rewrite catalog (YAML), before the built-in one")
    bench_seconds: float | None = Field(None, gt=0, description="with --bench: time budget per artifact and input set")
    memory_limit_mb: int | None = Field(None, gt=0, description="address space a worker may take")
    triton_launcher: str = Field("local", pattern="^(local|docker|url)$")
    triton_url: str | None = None
    triton_image: str = "nvcr.io/nvidia/tritonserver:24.10-py3"
