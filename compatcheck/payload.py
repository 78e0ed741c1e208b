"""A model object and its inputs, sent to a worker process as a file: `compatcheck.check(model, inputs)`.

torch.save pickles classes and functions by reference (module and name), so the worker imports
the modules that define them: it gets this process's sys.path. cloudpickle, when it is installed,
carries what no other process can import (a class defined in __main__ or inside a function) by
value. What cannot be moved either way is named in a one-line error that says how to fix it.
"""

from __future__ import annotations

import functools
import io
import pickle
import sys
import types
from pathlib import Path

from compatcheck.errors import UsageError

FILE_NAME = "model.payload.pt"


class _Unmovable(Exception):
    pass


def _importable_elsewhere(module_name: str) -> bool:
    """Whether a fresh process with this sys.path imports the module from the same file."""
    if module_name == "__main__":
        return False
    module = sys.modules.get(module_name)
    file = getattr(module, "__file__", None)
    if not file or not file.endswith(".py"):
        return True  # built in, compiled or a namespace: found the same way by any process
    parts = module_name.split(".")
    candidates = {Path(file).resolve()}
    for entry in sys.path:
        base = Path(entry or ".").resolve().joinpath(*parts)
        if {base.with_suffix(".py"), base / "__init__.py"} & candidates:
            return True
    return False


def _pickler_base():
    try:
        import cloudpickle
    except ImportError:
        return pickle.Pickler, None
    return cloudpickle.Pickler, cloudpickle


def _checking_module(by_value: list):
    """A pickle module for torch.save whose Pickler names the first class or function no worker
    could import, instead of writing a file that fails to load there. With cloudpickle, modules
    the worker cannot import are carried by value instead; they are appended to `by_value`."""
    base, cloudpickle = _pickler_base()
    importable = functools.cache(_importable_elsewhere)  # per payload: sys.path may change between calls

    class Pickler(base):
        def reducer_override(self, obj):
            if isinstance(obj, (type, types.FunctionType)):
                module = getattr(obj, "__module__", None) or "__main__"
                local = "<locals>" in getattr(obj, "__qualname__", "")
                if local or not importable(module):
                    if cloudpickle is None:
                        raise _Unmovable(f"{module}.{obj.__qualname__}")
                    if not local and module != "__main__" and module in sys.modules and module not in by_value \
                            and module not in cloudpickle.list_registry_pickle_by_value():
                        cloudpickle.register_pickle_by_value(sys.modules[module])
                        by_value.append(module)
            return super().reducer_override(obj) if cloudpickle else NotImplemented

    return types.SimpleNamespace(Pickler=Pickler, __name__="pickle"), cloudpickle


def pack(model, parts: dict, source: Path) -> bytes:
    """The file's bytes, of the model and `parts` (check()'s inputs, dynamic_shapes, tolerance and
    batch_dim); a UsageError saying what cannot be pickled and how to fix it."""
    import torch

    by_value: list[str] = []
    module, cloudpickle = _checking_module(by_value)
    buffer = io.BytesIO()
    payload = {"model": model, **parts, "source": str(source)}
    how = ("define it at module level in a file on sys.path, pip install cloudpickle, or pass isolate=False "
           "to run in this process (a crash in a stage then ends it)")
    try:
        torch.save(payload, buffer, pickle_module=module)
    except _Unmovable as exc:
        raise UsageError(f"cannot send the model to a worker process: {exc} cannot be imported there; {how}") from None
    except (pickle.PicklingError, TypeError, AttributeError) as exc:
        raise UsageError(f"cannot send the model to a worker process: pickling it failed with "
                         f"{type(exc).__name__}: {exc}; {how}") from None
    finally:
        for name in by_value:
            cloudpickle.unregister_pickle_by_value(sys.modules[name])
    return buffer.getvalue()


def unpack(path: Path, sys_path: list[str]):
    """The ModelSpec of a payload file (worker side), with the sender's sys.path to import its classes."""
    import torch

    from compatcheck.spec import INFER, assemble

    sys.path[:0] = [entry for entry in sys_path if entry not in sys.path]
    try:
        payload = torch.load(path, weights_only=False)
    except Exception as exc:
        raise UsageError(f"the worker could not load the model: {type(exc).__name__}: {exc}; define its classes "
                         "at module level in a file on sys.path, or pass isolate=False") from None
    model = payload["model"]
    dynamic = payload["dynamic_shapes"]
    return assemble(Path(payload["source"]), type(model).__qualname__, model, payload["inputs"], "inputs",
                    INFER if dynamic is None else dynamic, payload["tolerance"], "tolerance", is_object=True,
                    batch_dim=(payload["batch_dim"], "batch_dim"))
