"""A stage that failed because torch, onnx, onnxscript or onnxruntime could not import a module they
need is no verdict on the model: the environment is broken, and the fix is to install the module.

torch 2.10's inductor, for one, imports setuptools; a virtual environment made by uv (or by venv on
Python 3.12+) has none, so every model "fails" torch.compile there with an InductorError wrapping
`ModuleNotFoundError: No module named 'setuptools'`. An import inside the user's own code is the
model's business and stays a failure.

A torch.compile backend other than inductor that breaks an assertion in torch's guard code, where the
same model compiles with backend="eager", is the same kind of fault: the backend and the torch release
do not work together (openvino 2026.4's backend on torch 2.13 does so on any conv net).
"""

from __future__ import annotations

import os
import re
import sys
import traceback

from compatcheck.diagnose.found import plain
from compatcheck.errors import chain

LIBRARIES = ("torch", "onnx", "onnxscript", "onnxruntime")
_NO_MODULE = re.compile(r"No module named '([\w.]+)'")


def _library(filename: str) -> str | None:
    """Which of LIBRARIES the file belongs to, if any."""
    path = os.path.realpath(filename)
    for name in LIBRARIES:
        module = sys.modules.get(name)
        where = getattr(module, "__file__", None)
        if where and path.startswith(os.path.dirname(os.path.realpath(where)) + os.sep):
            return name
    return None


def _importer(error: ImportError) -> str | None:
    """The file whose import failed: the innermost frame that is not importlib's machinery."""
    frames = [f for f in traceback.extract_tb(error.__traceback__) if not f.filename.startswith("<")]
    return frames[-1].filename if frames else None


def fault(error: BaseException | None) -> tuple[str, str] | None:
    """(what is broken, how to fix it) when `error` comes from a library's failed import, else None."""
    for found in chain(error):
        if not isinstance(found, ImportError):
            continue
        importer = _importer(found)
        library = _library(importer) if importer else None
        if library is None:
            continue
        match = _NO_MODULE.search(str(found))
        named = found.name or (match.group(1) if match else None)
        if not named:
            return f"{library} could not import what it needs ({found})", "install what the message names"
        top = named.split(".")[0]
        fix = f"reinstall {top}: its module {named} is missing" if top in LIBRARIES else f"pip install {top}"
        return f"{library} needs the module {named!r}, which this environment lacks", fix
    return None


def broken_environment(stage: str, environment: str):
    """The finding of a stage that is no verdict on the model: what failed to import, and the fix."""
    return plain(stage, "broken-environment", environment)


# torch.compile's guard code: what it asserts are torch's own invariants, which no model breaks by itself.
_GUARD_CODE = ("torch/_dynamo/guards.py", "torch/_guards.py")


def _in_guard_code(error: BaseException) -> bool:
    frames = traceback.extract_tb(error.__traceback__)
    return isinstance(error, AssertionError) and any(
        frame.filename.replace(os.sep, "/").endswith(_GUARD_CODE) for frame in frames)


def _backend_release(backend: str) -> str:
    """'openvino 2026.4.1': the package that registers the backend, and its version."""
    from importlib import metadata

    from torch._dynamo.backends.registry import lookup_backend

    package = getattr(lookup_backend(backend), "__module__", "").split(".")[0]
    try:
        return f"{package} {metadata.version(package)}"
    except (metadata.PackageNotFoundError, ValueError):
        return package or backend


def backend_fault(ctx, backend: str, fullgraph: bool, error: BaseException | None) -> str | None:
    """A backend other than inductor that failed an assertion in torch's guard code, where the same model
    compiles and runs with backend="eager" (dynamo alone, which builds the same guards): the backend and this
    torch release do not work together, which is the environment's fault; None otherwise."""
    import torch

    if error is None or backend == "inductor" or not _in_guard_code(error):
        return None
    first = ctx.spec.input_sets[0]
    torch._dynamo.reset()
    try:
        with torch.no_grad():
            torch.compile(ctx.spec.reference_copy(), backend="eager", fullgraph=fullgraph)(*first.args, **first.kwargs)
    except Exception:
        return None  # dynamo alone fails too: the model's failure, which the stage's findings describe
    finally:
        torch._dynamo.reset()
    head = str(error).strip().splitlines()[0][:200] if str(error).strip() else ""
    return (f"torch.compile(backend={backend!r}) failed an assertion in torch "
            f"{torch.__version__.split('+')[0]}'s guard code (AssertionError: {head}), where the same model compiles "
            f"and runs with backend='eager': {_backend_release(backend)} and this torch release do not work together; "
            "fix: a torch release the backend supports, or another --compile-backend")
