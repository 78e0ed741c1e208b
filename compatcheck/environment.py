"""What the run ran on: interpreter, platform, package versions, device. Never environment variables."""

from __future__ import annotations

import platform
import sys
from importlib import metadata

PACKAGES = ("torch", "onnx", "onnxscript", "onnxruntime", "onnxruntime-gpu", "tritonclient", "numpy")


def collect() -> dict[str, str]:
    info = {"python": platform.python_version(), "platform": platform.platform(), "executable": sys.executable}
    for name in PACKAGES:
        try:
            info[name] = metadata.version(name)
        except metadata.PackageNotFoundError:
            continue
    if "torch" in sys.modules:
        import torch

        info["device"] = torch.cuda.get_device_name(0) if torch.cuda.is_available() else "cpu"
    return info
