"""triton: the ONNX file served by a real Triton Inference Server."""

from __future__ import annotations

from compatcheck.stages.base import Stage, StageContext


class Triton(Stage):
    name = "triton"
    requires = ("onnx_export",)
    flat_outputs = True

    def available(self, ctx: StageContext) -> str | None:
        return "the triton stage is not built yet"
