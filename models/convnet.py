"""A plain conv net with two batch sizes: every stage should pass, with a dynamic batch inferred; OpenVINO's
defaults (float16 weights, bfloat16 inference) differ, and it passes in float32."""

import torch
from torch import nn

# The verdicts compatcheck must give on CPU (torch 2.13); tests/test_models.py asserts them.
EXPECTED = {
    "eager": "pass",
    "compile": "pass",
    "compile_fullgraph": "pass",
    "export": "pass",
    "aot_inductor": "pass",
    "jit_script": "pass",
    "jit_trace": "pass",
    "onnx_export": "pass",
    "onnxruntime": "pass",
    "openvino": "mismatch",
}
# What the suite asserts of it (tests/test_findings.py); tests/test_openvino.py checks the rest.
EXPECTED_FINDINGS = [{"stage": "openvino", "kind": "reduced-precision", "op": None, "line": None}]

# With --dtype (docs/precision.md): tests/test_precision.py asserts these; aot_inductor's from a full run.
EXPECTED_FLOAT16 = {
    "eager": "pass",
    "compile": "pass",
    "compile_fullgraph": "pass",
    "export": "pass",
    "aot_inductor": "pass",
    "jit_script": "pass",
    "jit_trace": "pass",
    "onnx_export": "pass",
    "onnxruntime": "pass",
    "triton": "pass",
}
# onnx.checker refuses a bfloat16 Conv below opset 22, and onnxruntime's CPU provider has no bfloat16
# kernel for Conv, Relu, ReduceMean or Gemm at any opset: the file it is given fails there and in Triton.
EXPECTED_BFLOAT16 = {
    "eager": "pass",
    "compile": "pass",
    "compile_fullgraph": "pass",
    "export": "pass",
    "aot_inductor": "pass",
    "jit_script": "pass",
    "jit_trace": "pass",
    "onnx_export": "fail",
    "onnxruntime": "fail",
    "triton": "fail",
}
# --onnx-opset 22 reaches the ONNX stages only. The exporter's optimizer folds the BatchNorm into the
# first Conv and writes the fused weight as float32 in the bfloat16 graph, which onnx.checker refuses.
EXPECTED_BFLOAT16_OPSET_22 = {"eager": "pass", "onnx_export": "fail", "onnxruntime": "fail", "triton": "fail"}


class ConvNet(nn.Module):
    def __init__(self):
        super().__init__()
        self.features = nn.Sequential(
            nn.Conv2d(3, 16, 3, padding=1), nn.BatchNorm2d(16), nn.ReLU(),
            nn.Conv2d(16, 32, 3, stride=2, padding=1), nn.ReLU(),
            nn.AdaptiveAvgPool2d(1), nn.Flatten(),
        )
        self.head = nn.Linear(32, 10)

    def forward(self, x):
        return self.head(self.features(x))


def get_model():
    return ConvNet().eval()


def get_inputs():
    return [(torch.randn(2, 3, 32, 32),), (torch.randn(5, 3, 32, 32),)]
