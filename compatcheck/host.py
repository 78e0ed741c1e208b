"""What the run ran on: interpreter, platform, package versions, device, and the environment
variables that change how torch and onnxruntime behave, minus anything that looks like a secret."""

from __future__ import annotations

import os
import platform
import re
import sys
from importlib import metadata

from compatcheck import redact

PACKAGES = ("torch", "onnx", "onnxscript", "onnxruntime", "onnxruntime-gpu", "tritonclient", "openvino", "numpy")
RELEVANT = re.compile(r"^(TORCH|PYTORCH|TORCHINDUCTOR|OMP|MKL|OPENBLAS|CUDA|CUBLAS|CUDNN|NVIDIA|ORT|ONNX|TRITON|OV|OPENVINO)_")


def cores() -> int:
    """The cores this process may run on."""
    return len(os.sched_getaffinity(0)) if hasattr(os, "sched_getaffinity") else os.cpu_count() or 1


def variables() -> dict[str, str]:
    return {name: redact.text(value) for name, value in sorted(os.environ.items())
            if RELEVANT.match(name) and not redact.SECRET_NAME.search(name)}


def versions(names) -> dict[str, str]:
    """The installed version of each of `names` that is installed."""
    found = {}
    for name in names:
        try:
            found[name] = metadata.version(name)
        except metadata.PackageNotFoundError:
            continue
    return found


def collect() -> dict[str, str]:
    info = {"python": platform.python_version(), "platform": platform.platform(), "executable": sys.executable}
    info.update(versions(PACKAGES))
    if "torch" in sys.modules:
        import torch

        info["device"] = torch.cuda.get_device_name(0) if torch.cuda.is_available() else "cpu"
    info.update({f"env:{name}": value for name, value in variables().items()})
    return info


def cuda_missing() -> str | None:
    """Why `--device cuda` cannot run here (no CUDA build of torch, or no GPU it can see), or None."""
    import torch

    if torch.version.cuda is None:
        return f"torch {torch.__version__} is a build without CUDA"
    if not torch.cuda.is_available():
        return f"torch {torch.__version__} (CUDA {torch.version.cuda}) sees no GPU"
    return None
