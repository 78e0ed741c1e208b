"""`--triton local`: a tritonserver binary on this machine: the one COMPATCHECK_TRITONSERVER names, else
the one on PATH, else the nvidia-pytriton wheel's.

The wheel's server has only the Python backend, and its Python-backend stub has to be set up by hand:
copied into a private backend folder, started with PATH led by this interpreter's bin folder (the stub
runs Python in isolated mode and finds its environment from there; PYTHONPATH is ignored), and with
LD_LIBRARY_PATH holding this Python's lib folder and the wheel's bundled libraries (without them the
stub cannot start, and the model stays LOADING forever).
"""

from __future__ import annotations

import importlib.util
import os
import shutil
import sys
import sysconfig
from dataclasses import dataclass
from pathlib import Path

from compatcheck.triton.launcher import SERVER_FLAGS, ProcessLauncher

PYTHON = f"{sys.version_info.major}.{sys.version_info.minor}"


@dataclass(frozen=True)
class Installation:
    binary: Path
    backends: Path
    stub: Path | None  # the wheel's Python-backend stub for this Python, to copy into backends/python
    libraries: tuple[str, ...]  # for LD_LIBRARY_PATH
    source: str


ENVIRONMENT = "COMPATCHECK_TRITONSERVER"


def find() -> Installation | str:
    """The tritonserver to run, or why there is none."""
    named = os.environ.get(ENVIRONMENT)
    if named:
        binary = Path(named).expanduser()
        if not (binary.is_file() and os.access(binary, os.X_OK)):
            return f"tritonserver not found at {binary} (named by {ENVIRONMENT})"
        binary = binary.resolve()
        wheel = _wheel()
        if isinstance(wheel, Installation) and wheel.binary.resolve() == binary:
            return wheel  # the wheel's server needs its Python stub set up
        return _installed(binary)
    on_path = shutil.which("tritonserver")
    if on_path:
        return _installed(Path(on_path).resolve())
    return _wheel()


def _installed(binary: Path) -> Installation:
    """A server installed as Triton's releases lay it out: bin/tritonserver next to backends/."""
    return Installation(binary, binary.parent.parent / "backends", None, (), f"tritonserver at {binary}")


def _wheel() -> Installation | str:
    spec = importlib.util.find_spec("pytriton")
    if spec is None or not spec.submodule_search_locations:
        if sys.version_info >= (3, 13):  # its server's Python stub needs numpy 1.x, which has no 3.13 wheels
            return ("no tritonserver binary: none on PATH, and nvidia-pytriton does not install on Python "
                    f"{PYTHON}; set COMPATCHECK_TRITONSERVER or use --triton docker")
        return ("no tritonserver binary: none on PATH, and nvidia-pytriton is not installed "
                "(pip install 'compatcheck[triton-local]')")
    root = Path(spec.submodule_search_locations[0]) / "tritonserver"
    stub = root / "python_backend_stubs" / PYTHON / "triton_python_backend_stub"
    if not stub.exists():
        return f"nvidia-pytriton ships no Python-backend stub for Python {PYTHON}"
    import numpy

    if int(numpy.__version__.split(".")[0]) >= 2:
        return f"the Python backend of nvidia-pytriton's tritonserver needs numpy < 2, found {numpy.__version__}"
    libraries = (sysconfig.get_config_var("LIBDIR"), str(root.parent.parent / "nvidia_pytriton.libs"))
    return Installation(root / "bin" / "tritonserver", root / "backends", stub, libraries,
                        "nvidia-pytriton's tritonserver")


class LocalLauncher(ProcessLauncher):
    kind = "local"
    ready_timeout = 60.0

    def __init__(self, repository: Path, workdir: Path, installation: Installation):
        super().__init__(workdir)
        self.repository = repository
        self.installation = installation
        self.native = (installation.backends / "onnxruntime").is_dir()

    @staticmethod
    def unavailable() -> str | None:
        found = find()
        return found if isinstance(found, str) else None

    def describe(self) -> str:
        return self.installation.source

    @property
    def backend_directory(self) -> Path:
        return self.installation.backends if self.installation.stub is None else self.workdir / "backends"

    def start(self) -> tuple[str, str]:
        if self.installation.stub is not None:
            private = self.backend_directory
            shutil.rmtree(private, ignore_errors=True)
            shutil.copytree(self.installation.backends, private)
            shutil.copy2(self.installation.stub, private / "python")
        return super().start()

    def command(self, http_port: int, grpc_port: int) -> list[str]:
        return [
            str(self.installation.binary), f"--model-repository={self.repository}",
            f"--backend-directory={self.backend_directory}",
            "--http-address=127.0.0.1", f"--http-port={http_port}",
            "--grpc-address=127.0.0.1", f"--grpc-port={grpc_port}",
            *SERVER_FLAGS,
        ]

    def environment(self) -> dict[str, str]:
        env = dict(os.environ)
        if self.installation.stub is not None:
            # filter: an empty entry would mean the current folder
            env["PATH"] = os.pathsep.join(filter(None, [str(Path(sys.executable).parent), env.get("PATH")]))
            env["LD_LIBRARY_PATH"] = os.pathsep.join(
                filter(None, [*self.installation.libraries, env.get("LD_LIBRARY_PATH")]))
        return env
