"""triton: the ONNX file served by a real Triton Inference Server, every input set sent over HTTP and gRPC,
then many requests at once, as production sends them.

One server and one model answer both protocols, so their answers must be identical: a difference fails
the input set, and the HTTP answer is what is compared with eager. Then LOAD_REQUESTS requests of mixed
sizes (slices of the user's samples), half over each protocol, are sent alone and then all at once, for
the dynamic batcher (waiting --triton-queue-delay) to pack: every answer is compared with eager on its
samples, and one that matched alone but not when it shared a batch makes the stage a mismatch, naming
the request and its batch partners (the Python-backend model logs them; the native backends do not say,
so there only the server's statistics tell how the requests were batched). The backend text says which
server and Triton backend served it, how long the server took to be ready, the request latency and how
the concurrent requests were batched.
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

from compatcheck.report.model import ConcurrencyLevel, Finding, ServedLoad, ServedRequest
from compatcheck.diagnose.serving import batcher_misfits, changed_under_load, not_loaded, server_failed
from compatcheck.stages.base import Stage, StageContext

PROTOCOLS = {"http": "HTTP", "grpc": "gRPC"}
LOAD_REQUESTS = 16  # sent at once, half over each protocol


class ProtocolMismatch(Exception):
    """HTTP and gRPC answered the same request differently."""


def _launcher(ctx: StageContext, repository: Path):
    options, workdir = ctx.options, ctx.workdir / "triton"
    if options.triton == "local":
        from compatcheck.triton import local

        return local.LocalLauncher(repository, workdir, local.find())
    if options.triton == "docker":
        from compatcheck.triton.docker import DockerLauncher, docker_cli

        return DockerLauncher(repository, workdir, options.triton_image, gpus=options.device == "cuda",
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


def _alive(launcher, grace: float = 0.5) -> None:
    """Raise 'the server died' when it did. A dying process closes its sockets a moment before its exit
    can be seen, so a request that just failed looks again for `grace` seconds before calling it alive."""
    from compatcheck.triton.errors import TritonError

    deadline = time.monotonic() + grace
    while True:
        try:
            launcher.check()
        except TritonError as exc:
            raise TritonError(f"the server died: {exc}") from None
        if time.monotonic() >= deadline:
            return
        time.sleep(0.05)


def _rows(rows: list[int]) -> str:
    start, end = rows
    return f"sample {end}" if end - start == 1 else f"samples {start + 1}-{end}"


def _latency(label: str, seconds: list[float]) -> str:
    """The first request pays for connections and the model's first run; the others show the steady cost."""
    text = f"{label} first request {seconds[0] * 1e3:.1f} ms"
    if len(seconds) > 1:
        text += f", then median {statistics.median(seconds[1:]) * 1e3:.1f} ms"
    return text


class Triton(Stage):
    name = "triton"
    serves = True
    flat_outputs = True

    def __init__(self):
        self.resources = ExitStack()  # unwinds in reverse: unload, close the clients, stop the server
        self.launcher = None
        self.served: str | None = None
        self.instances: str | None = None  # the instance group's kind: CPU, or GPU with --device cuda
        self.version: str | None = None
        self.load_seconds: float | None = None
        self.latency: dict[str, list[float]] = {protocol: [] for protocol in PROTOCOLS}
        self.identical = 0
        self.findings: list[Finding] = []  # on the config, and on answers that changed under load
        self.under_load_said: str | None = None  # how the concurrent requests went, in words
        self.log: Path | None = None  # where the Python-backend model logs each execution's requests

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
                                        batch_size=repository.max_batch_size(batches), device=ctx.options.device,
                                        queue_delay_ms=ctx.options.triton_queue_delay)
        ctx.artifacts[self.name] = str(folder)
        self.served = "onnxruntime backend" if launcher.native else "python backend (onnxruntime)"
        self.instances = "GPU" if ctx.options.device == "cuda" else "CPU"
        self.findings = self._misfits(ctx, io, config, max(batches, default=0))
        self.log = None
        if launcher.kind == "local" and not launcher.native:  # the model's log is a file on this machine
            self.log = ctx.workdir / "triton" / "executions.jsonl"
            self.log.unlink(missing_ok=True)
            config.parameters[repository.EXECUTION_LOG].string_value = str(self.log)

        http_url, grpc_url = self.resources.enter_context(launcher)
        client = Client(http_url, grpc_url)
        self.resources.callback(client.close)
        self.version = client.server_version()
        started = time.perf_counter()
        if launcher.remote:
            client.load(name, launcher, config=config, files=repository.model_files(folder, name))
        else:  # the config as written, and where to log the executions: the repository stays deployable
            client.load(name, launcher, config=config)
        self.load_seconds = time.perf_counter() - started
        self.resources.callback(client.unload, name)

        self.client, self.model, self.io, self.urls = client, name, io, (http_url, grpc_url)
        return self._runner(launcher, client, name, io)

    def _runner(self, launcher, client, name: str, io):
        """One input set sent over each protocol; the answers must be the same, and the HTTP one is the
        stage's."""
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

    def _misfits(self, ctx: StageContext, io, config, largest: int) -> list[Finding]:
        """What the dynamic batcher needs that the served model lacks, as findings on its config; only for
        a model whose every input has a dynamic batch dimension in eager, the only kind it could batch."""
        from compatcheck.spec import dynamic_dims
        from compatcheck.triton.load import misfits

        dims = dynamic_dims(ctx.spec)
        if not dims or any(0 not in one for one in dims):
            return []
        return batcher_misfits(self.name, misfits(io, config.max_batch_size, largest))

    def _requests(self, ctx: StageContext):
        """LOAD_REQUESTS requests, each with the input set it was cut from and the rows it holds."""
        from compatcheck.triton.load import Request, slices

        sets = ctx.spec.input_sets
        names = [spec.name for spec in self.io.inputs]
        arrays = [one.arrays_for(names, "the served model") for one in sets]
        rows = [len(leaves[0]) if self.io.batched else None for leaves in arrays]
        made = []
        for number, (index, start, end) in enumerate(slices(rows, LOAD_REQUESTS), 1):
            if start is None:  # the whole input set
                start, end = 0, len(arrays[index][0]) if arrays[index][0].ndim else 1
            cut = [array[start:end] for array in arrays[index]] if self.io.batched else arrays[index]
            protocol = list(PROTOCOLS)[(number - 1) % 2]
            payload = sets[index].map(lambda t, start=start, end=end: t[start:end]) if self.io.batched else sets[index]
            made.append((Request(f"r{number}", protocol, tuple(zip(self.io.inputs, cut))), index, start, end, payload))
        return made

    def under_load(self, ctx: StageContext) -> ServedLoad | None:
        from compatcheck.triton import load

        if not all(map(load.loopback, self.urls)):
            self.under_load_said = f"no concurrent requests: the server at {self.urls[0]} is not on this machine"
            return None
        made = self._requests(ctx)
        outputs = [spec.name for spec in self.io.outputs]
        try:
            alone = {request.id: self.client.infer(request.protocol, self.model, list(request.inputs), outputs,
                                                   request.id) for request, *_ in made}
            before, mark = self.client.statistics(self.model), self.log.stat().st_size if self.log else 0
            started = time.perf_counter()
            together = load.together(self.urls, self.model, [request for request, *_ in made], outputs)
            seconds = time.perf_counter() - started
            stats = self.client.statistics(self.model).since(before)
        except Exception:
            _alive(self.launcher)  # a dead server, not the broken connection it left, is the reason
            raise
        runs = load.executions(self.log, mark) if self.log else None
        order = {request.id: number for number, (request, *_) in enumerate(made)}
        partners = {one: sorted((other for other in run if other != one), key=order.get)
                    for run in runs or [] for one in run}
        served = []
        for request, index, start, end, payload in made:
            problem = self._changed(ctx, request, payload, alone[request.id], together[request.id], end - start)
            served.append(ServedRequest(id=request.id, protocol=request.protocol, input_set=index, rows=[start, end],
                                        shared_with=partners.get(request.id) if runs is not None else None,
                                        ok=problem is None, problem=problem))
        result = ServedLoad(addresses=list(self.urls), queue_delay_ms=ctx.options.triton_queue_delay,
                            requests=served, executions=stats.executions, inferences=stats.inferences,
                            batch_stats=stats.batches, seconds=round(seconds, 3),
                            shared=sum(bool(partners.get(r.id)) for r in served) if runs is not None else None)
        result.problem = self._problem(result)
        self.under_load_said = self._said(result)
        if result.problem:
            self.findings.append(changed_under_load(self.name, result.problem))
        elif ctx.options.bench:
            result.levels = self._levels(ctx, [request for request, *_ in made])
        return result

    def _changed(self, ctx: StageContext, request, payload, alone, together, rows: int) -> str | None:
        """How the request's answer differs from eager's on its samples: alone, or only under load."""
        from compatcheck.compare import compare_outputs

        expected = ctx.eager(payload)
        truth = functools.cache(lambda: ctx.float64(payload))
        for how, answer in (("alone", alone), ("under load", together)):
            leaves, structure = compare_outputs(expected, answer, ctx.tolerances, flat=True, fp64=truth,
                                                values=not ctx.varies)
            bad = [leaf for leaf in leaves if not leaf.ok]
            if bad or (structure and not leaves):
                what = f"output {bad[0].output}: {bad[0].problem}" if bad else structure
                kept = [f"output {name} {list(array.shape)}" for name, array in zip(
                    (spec.name for spec in self.io.outputs), answer) if self.io.batched and
                    (not array.ndim or array.shape[0] != rows)]
                if kept:
                    what += (f"; {', '.join(kept)} for a request of {rows} samples: the outputs do not keep the "
                             "batch dimension the batcher splits them along")
                return f"{how}: {what}"
        return None

    def _problem(self, result: ServedLoad) -> str | None:
        """The first request whose answer changed under load, with its batch partners, in words."""
        wrong = [r for r in result.requests if not r.ok]
        if not wrong:
            return None
        first = wrong[0]
        where = (f"request {first.id} ({PROTOCOLS[first.protocol]}, input set {first.input_set + 1} "
                 f"{_rows(first.rows)})")
        if first.problem.startswith("alone"):
            text = f"{where} sent alone answers differently from eager ({first.problem.removeprefix('alone: ')})"
        else:
            if first.shared_with is None:
                with_whom = (f"under load (the {self.served} does not say which requests shared its batches: "
                             f"{len(result.requests)} requests ran in {result.executions} executions)")
            elif first.shared_with:
                with_whom = f"when it shared a batch with {', '.join(first.shared_with)}"
            else:
                with_whom = "under load, though it ran in an execution of its own"
            text = (f"{where} answered differently {with_whom}: {first.problem.removeprefix('under load: ')}; "
                    "alone it matched eager")
        more = len(wrong) - 1
        return f"under {len(result.requests)} concurrent requests, {text}" + (
            f"; {more} more request{'s' * (more != 1)} changed" if more else "")

    def _said(self, result: ServedLoad) -> str:
        counts = {protocol: sum(r.protocol == protocol for r in result.requests) for protocol in PROTOCOLS}
        sent = ", ".join(f"{count} {PROTOCOLS[protocol]}" for protocol, count in counts.items())
        sizes = ", ".join(f"{size}×{count}" for size, count in result.batch_stats.items())
        said = (f"{len(result.requests)} concurrent requests ({sent}) ran in {result.executions} execution"
                f"{'s' * (result.executions != 1)} (batch sizes {sizes or 'none'})")
        if result.shared is not None:
            said += f", {result.shared} of them sharing a batch"
        good = sum(r.ok for r in result.requests)
        return said + f"; {good} of {len(result.requests)} answers as eager's"

    def _levels(self, ctx: StageContext, requests) -> list[ConcurrencyLevel]:
        """Throughput and latency at each concurrency level of load.LEVELS, per protocol, for the first
        input set's request, as perf_analyzer reports them."""
        from compatcheck.triton import load

        names = [spec.name for spec in self.io.inputs]
        first = ctx.spec.input_sets[0]
        inputs = list(zip(self.io.inputs, first.arrays_for(names, "the served model")))
        rows = len(inputs[0][1]) if self.io.batched and inputs and inputs[0][1].ndim else 1
        outputs = [spec.name for spec in self.io.outputs]
        label = self._label()
        levels = []
        for protocol in PROTOCOLS:
            for concurrency in load.LEVELS:
                one = load.level(self.urls, self.model, inputs, outputs, protocol, concurrency)
                levels.append(ConcurrencyLevel(
                    backend=label, protocol=protocol, concurrency=concurrency, requests=len(one.latencies),
                    seconds=round(one.seconds, 3), throughput=len(one.latencies) / one.seconds,
                    samples_per_second=len(one.latencies) * rows / one.seconds,
                    p50_ms=one.percentile_ms(50), p99_ms=one.percentile_ms(99)))
        return levels

    def _label(self) -> str:
        """What served the requests, and on what: the Python-backend model runs onnxruntime on the CPU."""
        if not self.launcher.native:
            return f"triton {self.version} python backend (onnxruntime on the CPU) via {self.launcher.kind}"
        kind = self.client.instance_kind(self.model)
        device = {"KIND_GPU": " on the GPU", "KIND_CPU": " on the CPU"}.get(kind, "")
        return f"triton {self.version} onnxruntime backend{device} via {self.launcher.kind}"

    def timed_runners(self, runner):
        return {f"triton_{protocol}": functools.partial(self.infer, protocol) for protocol in PROTOCOLS}

    def backend(self, ctx: StageContext) -> str | None:
        if self.launcher is None:
            return None
        parts = [f"triton {self.version or '(version unknown)'} {self.served} via {self.launcher.kind} on "
                 f"{self.instances} instances"]
        if self.launcher.ready_seconds is not None:
            parts.append(f"ready in {self.launcher.ready_seconds:.2f}s")
        if self.load_seconds is not None:
            parts.append(f"model loaded in {self.load_seconds:.2f}s")
        if self.latency["http"]:
            parts += [_latency(label, self.latency[protocol]) for protocol, label in PROTOCOLS.items()
                      if self.latency[protocol]]
            parts.append(f"HTTP and gRPC answers identical on {self.identical} input sets")
        if self.under_load_said:
            parts.append(self.under_load_said)
        return "; ".join(parts)

    def diagnose(self, ctx: StageContext, error: BaseException | None) -> list[Finding]:
        if error is None:
            return self.findings
        from compatcheck.triton.errors import TritonError, TritonLoadError

        if isinstance(error, TritonLoadError):
            return [not_loaded(self.name, error.model, error.reason), *self.findings]
        if isinstance(error, TritonError):
            return [server_failed(self.name, error), *self.findings]
        from compatcheck.diagnose.errors import error_finding

        return [error_finding(self.name, ctx, error, "runtime-error"), *self.findings]

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
