"""MobileViT (transformers), image classification at two image sizes. Tiny config, random weights, nothing
downloaded."""

import torch
from transformers import MobileViTConfig, MobileViTForImageClassification

# The verdicts compatcheck must give on CPU with tests/real-requirements.txt (torch 2.14.1, transformers
# 5.24); tests/test_real_models.py asserts them, and the findings below, from one run with TEST_OPTIONS.
# The patch unfolding rounds the image size up to whole patches (math.ceil): the program torch.export
# builds from 64x64 guards that rounding, and input set 2 (72x72) fails the guard, as the plain
# export-then-run script does; the ONNX program keeps no guard and fails in its Reshape. Neither error
# names a line of the user's: the finding is the error, at the input set it broke on.
EXPECTED = {
    "eager": "pass",
    "export": "fail",
    "onnx_export": "fail",
}
EXPECTED_FINDINGS = [
    {"stage": "export", "kind": "artifact-error", "says": ["input set 2", "Guard failed"]},
    {"stage": "onnx_export", "kind": "artifact-error", "says": ["input set 2", "is invalid for input of size"]},
]
EXPECTED_ROUTES = {"torch.export → AOTInductor": "blocked", "ONNX → onnxruntime → Triton": "blocked"}
TEST_OPTIONS = ["--stages", "eager,export,onnx_export"]


def get_model():
    config = MobileViTConfig(image_size=64, hidden_sizes=[16, 24, 32], neck_hidden_sizes=[8, 8, 16, 16, 24, 32, 64],
                             num_labels=5)
    return MobileViTForImageClassification(config).eval()


def get_inputs():
    return [{"pixel_values": torch.randn(2, 3, 64, 64)}, {"pixel_values": torch.randn(2, 3, 72, 72)}]
