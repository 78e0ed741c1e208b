"""LR-ASPP with a MobileNetV3 backbone from torchvision, a segmentation model returning a dict
({"out": per-pixel class scores}). Random weights, nothing downloaded."""

import torch
from torchvision.models.segmentation import lraspp_mobilenet_v3_large


# The verdicts compatcheck must give on CPU with tests/real-requirements.txt (torch 2.14.1, torchvision 0.29);
# tests/test_real_models.py asserts them, and the findings below, from one run with TEST_OPTIONS.
EXPECTED = {
    "eager": "pass",
    "jit_script": "pass",
    "jit_trace": "fail",
}
# The dict is returned by torchvision's forward, not the user's: the finding names that frame.
EXPECTED_FINDINGS = [
    {"stage": "jit_trace", "kind": "container-output", "line": None,
     "library_file": "torchvision/models/segmentation/lraspp.py", "says": ["strict=False"]},
]
EXPECTED_ROUTES = {"TorchScript (script)": "works", "TorchScript (trace)": "blocked"}
TEST_OPTIONS = []


def get_model():
    return lraspp_mobilenet_v3_large(weights=None, weights_backbone=None, num_classes=3).eval()


def get_inputs():
    return [(torch.randn(2, 3, 64, 64),), (torch.randn(3, 3, 64, 64),)]
