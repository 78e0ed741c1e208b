"""Map stack frames to the user's code, skipping torch and compatcheck internals, and find the library
frame (transformers, timm, torchvision, ...) where something happened below the user's line.

The user's code is the model file and the files beside it, and any installed package that is neither
the machinery under every model (torch, onnx, numpy, ...) nor a library compatcheck knows models are
built with (KNOWN_LIBRARIES): a team's own wheel in site-packages is theirs. `--user-packages`
marks a known library as the user's too (a fork they maintain)."""

from __future__ import annotations

import functools
import linecache
import os
import re
import traceback
from pathlib import Path

from compatcheck.errors import chain


_PACKAGE_DIR = Path(__file__).resolve().parent
_TRACED_FRAME = re.compile(r"^(.+\.py)\((\d+)\): \S+$")
# Installed packages whose frames are the machinery under every model: neither the user's nor the library
# a model is built with.
MACHINERY = {
    "torch", "functorch", "torchgen", "triton", "compatcheck", "onnx", "onnxscript", "onnx_ir", "onnxruntime", "openvino",
    "numpy", "sympy", "mpmath", "scipy", "typing_extensions", "packaging", "filelock", "fsspec", "jinja2",
    "markupsafe", "networkx", "yaml", "_yaml", "tqdm", "requests", "urllib3", "certifi", "idna", "google", "grpc",
    "tritonclient", "pydantic", "pydantic_core", "typer", "rich", "click", "pytest", "_pytest", "pluggy",
    "cloudpickle", "nvidia", "ml_dtypes", "PIL", "cv2", "regex", "tokenizers", "safetensors", "huggingface_hub",
    "hf_xet", "httpx", "httpcore", "anyio", "six", "setuptools", "pkg_resources", "_distutils_hack",
}
# Libraries models are built with: their frames are library code, below the user's line.
KNOWN_LIBRARIES = {
    "transformers", "timm", "torchvision", "torchaudio", "torchtext", "diffusers", "torch_geometric", "ultralytics",
    "accelerate", "peft", "sentence_transformers", "open_clip", "einops", "xformers", "flash_attn", "mmcv", "mmdet",
    "detectron2", "segmentation_models_pytorch", "lightning", "pytorch_lightning", "torchmetrics", "kornia",
    "monai", "dgl", "torch_scatter", "torch_sparse", "torch_cluster", "fairseq", "espnet", "nemo", "speechbrain",
}


@functools.lru_cache(maxsize=8192)  # asked of every loaded module's file, and again of each frame's
def _installed(filename: str) -> tuple[str, ...] | None:
    """The path of an installed file under its site-packages folder, or None for a file that is not one."""
    parts = Path(filename).parts
    for marker in ("site-packages", "dist-packages"):
        if marker in parts:
            return parts[len(parts) - 1 - parts[::-1].index(marker) + 1:]
    return None


def machinery(filename: str | None) -> bool:
    """Whether a file is part of the machinery under every model (torch's own code, numpy, ...)."""
    rest = _installed(filename) if filename and not filename.startswith("<") else None
    return bool(rest) and rest[0].removesuffix(".py") in MACHINERY


def library_path(filename: str | None, users: frozenset[str] = frozenset()) -> str | None:
    """'transformers/models/llama/modeling_llama.py' for a file of a library models are built with."""
    if not filename or filename.startswith("<"):
        return None
    rest = _installed(filename)
    if rest and len(rest) > 1 and rest[0] in KNOWN_LIBRARIES and rest[0] not in users:
        return "/".join(rest)
    return None


def pairs_of(stack) -> list[tuple[str, int]]:
    """(file, line) per frame, outermost first, from FrameSummaries or a printed Python stack."""
    if stack is None:
        return []
    if isinstance(stack, str):
        return _printed_locations(stack)
    return [(frame.filename, frame.lineno) for frame in stack if frame.lineno]


def _printed_locations(text: str) -> list[tuple[str, int]]:
    """Every location in printed text, in text order: Python stacks and TorchScript source ranges
    ('File "x.py", line 12'), and the tracer's stacks ('x.py(12): forward')."""
    found = []
    for line in (text or "").splitlines():
        line = line.strip()
        traced = _TRACED_FRAME.match(line)
        if traced:
            name, number = traced.group(1), traced.group(2)
        elif line.startswith('File "'):
            name, _, rest = line[len('File "'):].partition('"')
            rest = rest.strip().lstrip(",").strip()
            number = rest[len("line "):].split(",")[0].strip() if rest.startswith("line ") else ""
        else:
            continue
        if number.isdigit():
            found.append((name, int(number)))
    return found


@functools.cache
def _real_folder(folder: str) -> str:
    return os.path.realpath(folder)


def _resolved(filename: str) -> str:
    """os.path.realpath(filename), resolving each folder once: every loaded module's file is asked about,
    thousands of files in a few hundred folders."""
    if not os.path.isabs(filename) or "/.." in filename or "/./" in filename or os.path.islink(filename):
        return os.path.realpath(filename)
    folder, name = os.path.split(filename)
    return os.path.join(_real_folder(folder), name)


def _within(path: str, folder: str) -> bool:
    """Whether `path` is below `folder` (both resolved), as `Path(folder) in Path(path).parents` says."""
    return path != folder and path.startswith(folder if folder.endswith("/") else folder + "/")


def _top_package(path: Path) -> str | None:
    """The top-level package a file outside site-packages belongs to (an editable install, a checkout),
    by its folders' __init__.py files; None for a file in no package."""
    top = None
    folder = path.parent
    while (folder / "__init__.py").is_file():
        top, folder = folder.name, folder.parent
    return top


@functools.cache
def _stdlib() -> tuple[str, ...]:
    import sysconfig

    return tuple({str(Path(sysconfig.get_paths()[key]).resolve()) for key in ("stdlib", "platstdlib")})


def user_forwards(model):
    """The forward function of each module class in the model, once each."""
    seen = set()
    for module in model.modules():
        forward = getattr(type(module), "forward", None)
        if forward is not None and forward not in seen:
            seen.add(forward)
            yield forward


def user_sources(model, user: "UserCode"):
    """(forward, file, first line, source lines) for the forward of each of the user's own module classes
    in the model, once each; forwards whose source cannot be read are passed over."""
    import inspect

    for forward in user_forwards(model):
        try:
            lines, start = inspect.getsourcelines(forward)
            file = inspect.getsourcefile(forward)
        except (OSError, TypeError):
            continue
        if user.owns(file):
            yield forward, file, start, lines


class UserCode:
    """Knows which files are the user's: the model file, files beside it, and installed packages that are
    neither machinery nor a known library (or that `packages` names)."""

    def __init__(self, model_file: Path, packages=()):
        self.model_file = Path(model_file).resolve()
        self.root = self.model_file.parent
        self.packages = frozenset(packages)  # installed packages marked as the user's own
        self._owned: dict[str, bool] = {}  # asked of every loaded module and every frame: resolve each path once

    def owns(self, filename: str | None) -> bool:
        if not filename or filename.startswith("<"):
            return False
        if filename not in self._owned:
            self._owned[filename] = self._owns(filename)
        return self._owned[filename]

    def _owns(self, filename: str) -> bool:
        path = _resolved(filename)
        if _within(path, str(_PACKAGE_DIR)):
            return False
        installed = _installed(path)  # first: a virtual environment may live inside the project
        if installed is None and self._in_model_folder(path):
            return True
        top = installed[0].removesuffix(".py") if installed else _top_package(Path(path))
        if top in self.packages:
            return True
        if top in MACHINERY | KNOWN_LIBRARIES or (installed is None and path.startswith(_stdlib())):
            return False
        return top is not None  # an installed or editable package of the user's own

    def in_folder(self, filename: str | None) -> bool:
        """Whether a file is the model file or one in its folder (not an installed package there)."""
        if not self.owns(filename):
            return False
        path = _resolved(filename)
        return _installed(path) is None and self._in_model_folder(path)

    def _in_model_folder(self, path: str) -> bool:
        """Whether a resolved path is the model file or below its folder."""
        return path == str(self.model_file) or _within(path, str(self.root))

    def innermost(self, frames: list[traceback.FrameSummary]) -> traceback.FrameSummary | None:
        """The innermost frame in the user's code; frames are outermost first, as traceback gives them."""
        for frame in reversed(frames):
            if self.owns(frame.filename):
                return frame
        return None

    def from_exception(self, exc: BaseException) -> traceback.FrameSummary | None:
        """The innermost user frame of an exception, following its cause and context chain."""
        return next((frame for one in chain(exc) if (frame := self.innermost(traceback.extract_tb(one.__traceback__)))),
                    None)

    def locations(self, text: str | None) -> list[tuple[str, int]]:
        """Every user location in printed text, in text order."""
        return [(name, number) for name, number in _printed_locations(text or "") if self.owns(name)]

    @staticmethod
    def printed_locations(text: str | None) -> list[tuple[str, int]]:
        """Every location in printed text, the user's or not, in text order."""
        return _printed_locations(text or "")

    def library_frame(self, stack) -> tuple[str, int] | None:
        """The innermost library frame below the user's innermost one (or anywhere, when the stack
        never passes through the user's code); `stack` is FrameSummaries or a printed stack."""
        pairs = pairs_of(stack)
        user = max((i for i, (name, _) in enumerate(pairs) if self.owns(name)), default=-1)
        return next(((name, line) for name, line in reversed(pairs[user + 1:]) if library_path(name, self.packages)), None)

    def exception_stack(self, exc: BaseException) -> list[traceback.FrameSummary]:
        """The traceback of the exception in the cause/context chain that passes through the user's code,
        else of the innermost one: the stack the error happened in."""
        last = []
        for one in chain(exc):
            last = traceback.extract_tb(one.__traceback__)
            if self.innermost(last) is not None:
                return last
        return last

    def from_stack_text(self, text: str | None) -> tuple[str, int] | None:
        """The innermost user location in a printed Python stack (outermost first), as FX nodes keep."""
        found = self.locations(text)
        return found[-1] if found else None

    def location(self, location=None, stack=None) -> tuple[str | None, int | None]:
        """(file, line) of `location` (a FrameSummary or a (file, line) pair), by default the innermost
        user frame of `stack`."""
        if location is None and stack is not None:
            pairs = [pair for pair in pairs_of(stack) if self.owns(pair[0])]
            location = pairs[-1] if pairs else None
        if isinstance(location, traceback.FrameSummary):
            return location.filename, location.lineno
        return tuple(location) if location else (None, None)

    def display(self, file: str | None) -> str | None:
        """The file as the user named it: relative to the model's folder when inside it."""
        if not file:
            return None
        path = Path(file).resolve()
        try:
            return str(path.relative_to(self.root))
        except ValueError:
            return str(path)


def source_line(file: str | None, line: int | None) -> str | None:
    return linecache.getline(file, line).strip() or None if file and line else None
