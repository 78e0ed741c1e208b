"""triton: the ONNX file served by a real Triton Inference Server, every input set sent over HTTP and gRPC.

One server and one model answer both protocols, so their answers must be identical: a difference fails
the input set, and the HTTP answer is what is compared with eager. The backend text says which server
and Triton backend served it, how long the server took to be ready and the request latency.
"""

from __future__ import annotations

import functools
import shutil
import statistics
import time
import uuid
from contextlib import ExitStack
from pathlib import Path

import numpy as np

from compatcheck.report.model import Finding
from compatcheck.stages.base import Stage, StageContext

PROTOCOLS = {"http": "HTTP", "grpc": "gRPC"}


class ProtocolMismatch(Exception):
    """HTTP and gRPC answered the same request differently."""


def _launcher(ctx: StageContext, repository: Path):
    options, workdir = ctx.options, ctx.workdir / "triton"
    if options.triton == "local":
        from compatcheck.triton import local

        return local.LocalLauncher(repository, workdir, local.find())
    if options.triton == "docker":
        import torch

        from compatcheck.triton.docker import DockerLauncher, docker_cli

        return DockerLauncher(repository, workdir, options.triton_image, gpus=torch.cuda.is_available(),
                              docker=docker_cli())
    from compatcheck.triton.url import UrlLauncher

    return UrlLauncher(options.triton_url)


def _identical(answers: dict[str, list[np.ndarray]], names: list[str]) -> None:
    for name, http, grpc in zip(names, answers["http"], answers["grpc"]):
        same = http.dtype == grpc.dtype and http.shape == grpc.shape and np.array_equal(
            http, grpc, equal_nan=http.dtype.kind in "fc")
        if not same:
            raise ProtocolMismatch(
                f"output {name}: the gRPC answer ({grpc.dtype} {list(grpc.shape)}) is not identical to the "
                f"HTTP answer ({http.dtype} {list(http.shape)})"
            )


def _alive(launcher) -> None:
    from compatcheck.triton.errors import TritonError

    try:
        launcher.check()
    except TritonError as exc:
        raise TritonError(f"the server died: {exc}") from None


def _latency(label: str, seconds: list[float]) -> str:
    """The first request pays for connections and the model's first run; the others show the steady cost."""
    text = f"{label} first request {seconds[0] * 1e3:.1f} ms"
    if len(seconds) > 1:
        text += f", then median {statistics.median(seconds[1:]) * 1e3:.1f} ms"
    return text


class Triton(Stage):
    name = "triton"
    flat_outputs = True

    def __init__(self):
        self.resources = ExitStack()  # unwinds in reverse: unload, close the clients, stop the server
        self.launcher = None
        self.served: str | None = None
        self.version: str | None = None
        self.load_seconds: float | None = None
        self.latency: dict[str, list[float]] = {protocol: [] for protocol in PROTOCOLS}
        self.identical = 0

    def available(self, ctx: StageContext) -> str | None:
        try:
            import tritonclient.grpc  # noqa: F401
            import tritonclient.http  # noqa: F401
        except ImportError as exc:
            return f"tritonclient with HTTP and gRPC is not installed ({exc}); pip install 'compatcheck[triton]'"
        options = ctx.options
        if options.triton == "local":
            from compatcheck.triton.local import LocalLauncher

            return LocalLauncher.unavailable()
        if options.triton == "docker":
            from compatcheck.triton.docker import DockerLauncher

            return DockerLauncher.unavailable(options.triton_image)
        from compatcheck.triton.url import UrlLauncher

        return UrlLauncher.unavailable(options.triton_url)

    def build(self, ctx: StageContext):
        from compatcheck.triton import repository
        from compatcheck.triton.client import Client

        onnx_file = Path(ctx.artifacts["onnx_export"])
        io = repository.onnx_io(onnx_file)
        folder = ctx.workdir / "triton" / "repository"
        shutil.rmtree(folder, ignore_errors=True)
        self.launcher = launcher = _launcher(ctx, folder)
        name = repository.model_name(ctx.spec.path.stem)
        if launcher.remote:
            name = f"compatcheck-{name}-{uuid.uuid4().hex[:8]}"  # never replace a model of theirs
        batches = [leaf.shape[0] for s in [*ctx.spec.input_sets, *(one.input_set for one in ctx.swept.sets)]
                   for leaf in s.leaves() if leaf.dim()]
        config = repository.write_model(folder, name, "onnx", onnx_file, io, native=launcher.native,
                                        batch_size=repository.max_batch_size(batches))
        ctx.artifacts[self.name] = str(folder)
        self.served = "onnxruntime backend" if launcher.native else "python backend (onnxruntime)"

        http_url, grpc_url = self.resources.enter_context(launcher)
        client = Client(http_url, grpc_url)
        self.resources.callback(client.close)
        self.version = client.server_version()
        started = time.perf_counter()
        if launcher.remote:
            client.load(name, launcher, config=config, files=repository.model_files(folder, name))
        else:
            client.load(name, launcher)
        self.load_seconds = time.perf_counter() - started
        self.resources.callback(client.unload, name)

        names = [spec.name for spec in io.inputs]
        outputs = [spec.name for spec in io.outputs]

        def infer(protocol, input_set):
            return client.infer(protocol, name, list(zip(io.inputs, input_set.arrays_for(names, "the served model"))), outputs)

        def run(input_set):
            answers = {}
            for protocol in PROTOCOLS:
                started = time.perf_counter()
                try:
                    answers[protocol] = infer(protocol, input_set)
                except Exception:
                    _alive(launcher)  # a dead server, not the broken connection it left, is the reason
                    raise
                self.latency[protocol].append(time.perf_counter() - started)
            _identical(answers, outputs)
            self.identical += 1
            return answers["http"]

        self.infer = infer
        return run

    def timed_runners(self, runner):
        return {f"triton_{protocol}": functools.partial(self.infer, protocol) for protocol in PROTOCOLS}

    def backend(self, ctx: StageContext) -> str | None:
        if self.launcher is None:
            return None
        parts = [f"triton {self.version or '(version unknown)'} {self.served} via {self.launcher.kind}"]
        if self.launcher.ready_seconds is not None:
            parts.append(f"ready in {self.launcher.ready_seconds:.2f}s")
        if self.load_seconds is not None:
            parts.append(f"model loaded in {self.load_seconds:.2f}s")
        if self.latency["http"]:
            parts += [_latency(label, self.latency[protocol]) for protocol, label in PROTOCOLS.items()
                      if self.latency[protocol]]
            parts.append(f"HTTP and gRPC answers identical on {self.identical} input sets")
        return "; ".join(parts)

    def diagnose(self, ctx: StageContext, error: BaseException | None) -> list[Finding]:
        if error is None:
            return []
        from compatcheck.triton.errors import TritonError, TritonLoadError

        if isinstance(error, TritonLoadError):
            return [Finding(stage=self.name, kind="triton-load-failure",
                            message=f"the server did not load model {error.model!r}: {error.reason}")]
        if isinstance(error, TritonError):
            return [Finding(stage=self.name, kind="triton-server-error", message=str(error))]
        from compatcheck.diagnose.errors import error_finding

        return [error_finding(self.name, ctx, error, "runtime-error")]

    def reproduce(self, ctx: StageContext) -> str:
        from compatcheck.triton.repository import model_name

        name = model_name(ctx.spec.path.stem)
        return (
            "# First start a Triton server on ./triton/repository (ports 8000 HTTP, 8001 gRPC); for the official\n"
            "# image write native models with `compatcheck triton-repo` and use docker/docker-compose.yml.\n"
            "import tritonclient.http as httpclient\n"
            "client = httpclient.InferenceServerClient('127.0.0.1:8000')\n"
            f"metadata = client.get_model_metadata({name!r})\n"
            "def run(args, kwargs):\n"
            "    inputs = []\n"
            "    for spec, leaf in zip(metadata['inputs'], torch.utils._pytree.tree_leaves((args, kwargs))):\n"
            "        inputs.append(httpclient.InferInput(spec['name'], list(leaf.shape), spec['datatype']))\n"
            "        inputs[-1].set_data_from_numpy(leaf.numpy())\n"
            f"    result = client.infer({name!r}, inputs)\n"
            "    return [result.as_numpy(output['name']) for output in metadata['outputs']]\n"
            "return run\n"
        )

    def close(self) -> None:
        self.resources.close()
