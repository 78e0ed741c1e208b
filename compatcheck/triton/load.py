"""Many requests at once, as production sends them: each request in a thread with clients of its own,
released together so that the dynamic batcher can pack them; and the concurrency levels of --bench.

Every loop here is bounded by a count and a deadline, and only a server on this machine (loopback) is
ever sent load.
"""

from __future__ import annotations

import ipaddress
import itertools
import json
import threading
import time
from dataclasses import dataclass
from pathlib import Path

import numpy as np

from compatcheck.triton.client import Client
from compatcheck.triton.errors import TritonError
from compatcheck.triton.repository import ModelIO, TensorSpec

LOAD_TIMEOUT = 60.0  # seconds for every concurrent request to come back
LEVELS = (1, 4, 16)  # --bench: requests in flight at once
LEVEL_REQUESTS = 200  # --bench: at most this many timed requests per level...
LEVEL_SECONDS = 10.0  # ...or this long, whichever comes first


@dataclass(frozen=True)
class Request:
    id: str  # sent as the request id: the Python-backend model logs it with its batch partners
    protocol: str
    inputs: tuple[tuple[TensorSpec, np.ndarray], ...]


@dataclass(frozen=True)
class Level:
    protocol: str
    concurrency: int
    latencies: tuple[float, ...]  # seconds per timed request
    seconds: float  # from the first timed request sent to the last answered

    def percentile_ms(self, percent: float) -> float:
        return float(np.percentile(self.latencies, percent, method="higher")) * 1e3


def loopback(address: str) -> bool:
    """Whether HOST:PORT (or [HOST]:PORT) names this machine."""
    host = address.rpartition(":")[0].strip("[]")
    if host == "localhost":
        return True
    try:
        return ipaddress.ip_address(host).is_loopback
    except ValueError:
        return False


def _this_machine(urls: tuple[str, str]) -> None:
    for url in urls:
        if not loopback(url):
            raise TritonError(f"refusing to send load to {url}: not this machine")


def together(urls: tuple[str, str], model: str, requests: list[Request], outputs: list[str],
             timeout: float = LOAD_TIMEOUT) -> dict[str, list[np.ndarray]]:
    """Send every request at the same moment, each from its own thread; their answers by request id."""
    _this_machine(urls)
    barrier = threading.Barrier(len(requests))
    answers: dict[str, list[np.ndarray]] = {}
    errors: list[BaseException] = []

    def send(request: Request) -> None:
        client = None
        try:
            client = Client(*urls, timeout=timeout)
            barrier.wait(timeout)
            answers[request.id] = client.infer(request.protocol, model, list(request.inputs), outputs, request.id)
        except Exception as exc:
            barrier.abort()  # the others go on without waiting for this one
            errors.append(exc)
        finally:
            if client is not None:
                client.close()

    threads = [threading.Thread(target=send, args=(request,), name=f"request {request.id}", daemon=True)
               for request in requests]
    deadline = time.monotonic() + timeout
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join(max(0.0, deadline - time.monotonic()))
    real = [error for error in errors if not isinstance(error, threading.BrokenBarrierError)]
    if errors:
        raise (real or errors)[0]
    late = [request.id for request in requests if request.id not in answers]
    if late:
        raise TritonError(f"{len(late)} of {len(requests)} concurrent requests had no answer after {timeout:g}s "
                          f"({', '.join(late[:5])})")
    return answers


def level(urls: tuple[str, str], model: str, inputs: list[tuple[TensorSpec, np.ndarray]], outputs: list[str],
          protocol: str, concurrency: int, *, requests: int = LEVEL_REQUESTS, seconds: float = LEVEL_SECONDS,
          timeout: float = LOAD_TIMEOUT) -> Level:
    """`concurrency` clients sending the same request back to back, as perf_analyzer does, until
    `requests` were sent or `seconds` passed; each client's first request (its connection, and the
    model's warm-up) is not timed."""
    _this_machine(urls)
    tickets = itertools.count()
    start = threading.Barrier(concurrency + 1)
    latencies: list[float] = []
    errors: list[BaseException] = []

    def work() -> None:
        client = None
        try:
            client = Client(*urls, timeout=timeout)
            client.infer(protocol, model, inputs, outputs)
            start.wait(timeout)
            stop = time.perf_counter() + seconds
            while next(tickets) < requests and time.perf_counter() < stop:
                sent = time.perf_counter()
                client.infer(protocol, model, inputs, outputs)
                latencies.append(time.perf_counter() - sent)
        except Exception as exc:
            start.abort()
            errors.append(exc)
        finally:
            if client is not None:
                client.close()

    threads = [threading.Thread(target=work, name=f"bench {protocol} {concurrency}", daemon=True)
               for _ in range(concurrency)]
    for thread in threads:
        thread.start()
    try:
        start.wait(timeout)
    except threading.BrokenBarrierError:
        pass  # a client failed: its error is raised below
    began = time.perf_counter()
    ends = time.monotonic() + seconds + timeout
    for thread in threads:
        thread.join(max(0.0, ends - time.monotonic()))
    elapsed = time.perf_counter() - began
    real = [error for error in errors if not isinstance(error, threading.BrokenBarrierError)]
    if errors:
        raise (real or errors)[0]
    if any(thread.is_alive() for thread in threads):
        raise TritonError(f"{protocol} requests at concurrency {concurrency} had no answer after {timeout:g}s")
    return Level(protocol, concurrency, tuple(latencies), elapsed)


def slices(rows: list[int | None], count: int) -> list[tuple[int, int | None, int | None]]:
    """`count` payloads as (input set, start, end): distinct slices of the input sets' samples as far as
    they go, mixing sizes and sets; a whole input set (start and end None) where `rows` has None, its
    batch not being one the server may split."""
    per_set = []
    for index, size in enumerate(rows):
        if size is None:
            per_set.append([(index, None, None)])
            continue
        by_length = [[(index, start, start + length) for start in range(size - length + 1)]
                     for length in range(1, size + 1)]
        per_set.append([one for turn in itertools.zip_longest(*by_length) for one in turn if one])
    distinct = [one for turn in itertools.zip_longest(*per_set) for one in turn if one]
    return [distinct[k % len(distinct)] for k in range(count)] if distinct else []


def misfits(io: ModelIO, max_batch_size: int, largest: int) -> list[str]:
    """What keeps the dynamic batcher from batching a model whose inputs all have a dynamic batch
    dimension, in words: a config that declares no batch dimension, and why; a max_batch_size below the
    largest request."""
    if max_batch_size == 0:
        first = {spec.leading for spec in io.inputs}
        if None in first or len(first) > 1:
            fixed = [spec for spec in io.inputs if spec.leading is None] or list(io.inputs)
            why = ", ".join(f"input {spec.name!r} {_dims(spec)}" for spec in fixed)
            why += " in the ONNX graph: the inputs share no dynamic first dimension"
        else:
            batch = first.pop()
            lost = [spec for spec in io.outputs if spec.leading != batch]
            why = ", ".join(f"output {spec.name!r} {_dims(spec)}" for spec in lost)
            why += f" in the ONNX graph: {'it does' if len(lost) == 1 else 'they do'} not keep the inputs' batch " \
                   f"dimension {batch!r}"
        return [f"config.pbtxt has max_batch_size 0, so the dynamic batcher is off and every request runs on its "
                f"own: {why}. The batcher stacks requests along a first dimension every input and output shares"]
    if largest > max_batch_size:
        return [f"config.pbtxt has max_batch_size {max_batch_size}, below the largest request ({largest} samples): "
                "the server refuses it"]
    return []


def _dims(spec: TensorSpec) -> str:
    return "[" + ", ".join(spec.leading if i == 0 and spec.leading else "?" if size < 0 else str(size)
                           for i, size in enumerate(spec.shape)) + "]"


def executions(log: Path, since: int) -> list[list[str]]:
    """The request ids of each execution the Python-backend model logged after byte `since`."""
    with log.open("rb") as lines:
        lines.seek(since)
        return [json.loads(line) for line in lines.read().decode().splitlines() if line.strip()]
