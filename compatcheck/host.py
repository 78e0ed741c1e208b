"""What the run ran on: interpreter, platform, package versions, device, and the environment
variables that change how torch and onnxruntime behave, minus anything that looks like a secret."""

from __future__ import annotations

import os
import platform
import re
import sys
from importlib import metadata

from compatcheck import redact

PACKAGES = ("torch", "onnx", "onnxscript", "onnxruntime", "onnxruntime-gpu", "tritonclient", "numpy")
RELEVANT = re.compile(r"^(TORCH|PYTORCH|TORCHINDUCTOR|OMP|MKL|OPENBLAS|CUDA|CUBLAS|CUDNN|NVIDIA|ORT|ONNX|TRITON)_")


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


WORKER_BYTES = 3 * 2**30  # a worker holds torch, inductor's compiler and the model: budgeted this much each


def _available_memory() -> int | None:
    """Bytes the kernel says new processes can have (MemAvailable), where it says."""
    try:
        with open("/proc/meminfo") as meminfo:
            line = next(one for one in meminfo if one.startswith("MemAvailable:"))
        return int(line.split()[1]) * 1024
    except (OSError, StopIteration, ValueError):
        return None


def _running_others() -> int:
    """Processes running on a core right now besides this one (the kernel's count of runnable tasks)."""
    try:
        with open("/proc/loadavg") as loadavg:
            return max(0, int(loadavg.read().split()[3].split("/")[0]) - 1)
    except (OSError, IndexError, ValueError):
        return 0


def default_jobs(lanes: int, memory_limit_mb: int | None) -> int:
    """Workers for a run that does not set --jobs: one per idle core (the cores this process may use, less
    the processes running on them now), at most one per lane of stages, and no more than the available
    memory holds at WORKER_BYTES each (or at --memory-limit each); at least one."""
    cores = len(os.sched_getaffinity(0)) if hasattr(os, "sched_getaffinity") else os.cpu_count() or 1
    busy = _running_others()
    available = _available_memory()
    each = memory_limit_mb * 2**20 if memory_limit_mb else WORKER_BYTES
    fits = available // each if available is not None else cores
    return max(1, min(cores - busy, lanes, fits))
