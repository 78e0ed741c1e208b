"""A vision transformer from timm: patch embedding, class token, attention blocks. Tiny config,
random weights, nothing downloaded."""

import timm
import torch


# The verdicts compatcheck must give on CPU with tests/real-requirements.txt (torch 2.14.1, timm 1.0);
# tests/test_real_models.py asserts them, and the findings below, from one run with TEST_OPTIONS.
# compile_backend aot_eager keeps the compile stages quick on two cores; graph breaks and guards come
# from dynamo, which is the same for every backend.
EXPECTED = {
    "eager": "pass",
    "compile": "pass",
    "compile_fullgraph": "pass",
    "jit_script": "pass",
    "jit_trace": "pass",
    "onnx_export": "pass",
    "onnxruntime": "pass",
}
EXPECTED_FINDINGS = []
# The tracer warns that timm's shape check formats a size into its message (a frozen number), which holds
# for every input set here; the branch of the check itself runs inside torch._assert, torch's own code.
EXPECTED_ROUTES = {"torch.compile": "works", "TorchScript (script)": "works",
                   "TorchScript (trace)": "works-with-warnings", "ONNX → onnxruntime → Triton": "works"}
TEST_OPTIONS = ["--compile-backend", "aot_eager"]


def get_model():
    return timm.create_model("vit_tiny_patch16_224", pretrained=False, img_size=32, patch_size=8, embed_dim=32,
                             depth=2, num_heads=2, num_classes=10).eval()


def get_inputs():
    return [(torch.randn(2, 3, 32, 32),), (torch.randn(3, 3, 32, 32),)]
