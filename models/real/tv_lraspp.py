"""LR-ASPP with a MobileNetV3 backbone from torchvision, a segmentation model returning a dict
({"out": per-pixel class scores}). Random weights, nothing downloaded."""

import torch
from torchvision.models.segmentation import lraspp_mobilenet_v3_large


def get_model():
    return lraspp_mobilenet_v3_large(weights=None, weights_backbone=None, num_classes=3).eval()


def get_inputs():
    return [(torch.randn(2, 3, 64, 64),), (torch.randn(3, 3, 64, 64),)]
