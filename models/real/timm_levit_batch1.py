"""LeViT from timm exported from a batch of one: the first input set has batch 1, the second batch 2.
Random weights, nothing downloaded."""

import timm
import torch


def get_model():
    return timm.create_model("levit_128s", pretrained=False, num_classes=10).eval()


def get_inputs():
    return [(torch.randn(1, 3, 224, 224),), (torch.randn(2, 3, 224, 224),)]
