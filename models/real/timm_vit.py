"""A vision transformer from timm: patch embedding, class token, attention blocks. Tiny config,
random weights, nothing downloaded."""

import timm
import torch


def get_model():
    return timm.create_model("vit_tiny_patch16_224", pretrained=False, img_size=32, patch_size=8, embed_dim=32,
                             depth=2, num_heads=2, num_classes=10).eval()


def get_inputs():
    return [(torch.randn(2, 3, 32, 32),), (torch.randn(3, 3, 32, 32),)]
