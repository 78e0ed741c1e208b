"""Talking to a running server with tritonclient: load the model (with the server's reason when it
refuses), send requests over HTTP or gRPC, unload."""

from __future__ import annotations

import threading
import time
from dataclasses import dataclass

import numpy as np

from compatcheck.triton.errors import TritonError, TritonLoadError
from compatcheck.triton.launcher import Launcher
from compatcheck.triton.repository import TensorSpec

PROTOCOLS = ("http", "grpc")
REQUEST_TIMEOUT = 120.0
LOAD_TIMEOUT = 300.0
# What the load API says when config.pbtxt does not parse or is invalid; the reason is only in the log.
POLL_FAILED = "failed to poll from model repository"


@dataclass(frozen=True)
class Statistics:
    executions: int  # runs of the model, each on one batch
    inferences: int  # samples, summed over the batches
    batches: dict[int, int]  # batch size -> how many executions ran a batch of that size

    def since(self, earlier: "Statistics") -> "Statistics":
        batches = {size: count - earlier.batches.get(size, 0) for size, count in self.batches.items()}
        return Statistics(self.executions - earlier.executions, self.inferences - earlier.inferences,
                          {size: count for size, count in sorted(batches.items()) if count})


class Client:
    def __init__(self, http_url: str, grpc_url: str, timeout: float = REQUEST_TIMEOUT):
        import tritonclient.grpc
        import tritonclient.http

        self.modules = {"http": tritonclient.http, "grpc": tritonclient.grpc}
        self.clients = {
            "http": tritonclient.http.InferenceServerClient(http_url, connection_timeout=timeout,
                                                            network_timeout=timeout),
            "grpc": tritonclient.grpc.InferenceServerClient(grpc_url),
        }
        self.timeout = timeout

    def server_version(self) -> str:
        return self.clients["http"].get_server_metadata()["version"]

    def load(self, name: str, server: Launcher, *, config=None, files: dict[str, bytes] | None = None,
             timeout: float = LOAD_TIMEOUT) -> None:
        """Load through the repository API. The call runs in a thread while the server is watched: one
        that dies, or whose model can never become ready, would otherwise keep us waiting."""
        from google.protobuf import json_format
        from tritonclient.utils import InferenceServerException

        mark = server.log_mark()
        failure: list[BaseException] = []

        def call():
            try:
                self.clients["grpc"].load_model(
                    name, config=json_format.MessageToJson(config) if config is not None else None,
                    files=files, client_timeout=timeout,
                )
            except Exception as exc:
                failure.append(exc)

        thread = threading.Thread(target=call, name=f"load {name}", daemon=True)
        thread.start()
        while thread.is_alive():
            try:
                server.check()
            except TritonError as exc:
                raise TritonLoadError(name, str(exc)) from None
            thread.join(0.1)
        if not failure:
            return
        error = failure[0]
        if not isinstance(error, InferenceServerException):
            raise error
        message = error.message() or str(error)
        if "DEADLINE_EXCEEDED" in str(error.status()):
            raise TritonLoadError(name, f"not loaded after {timeout:g}s")
        extra = [reason for reason in [self.index_reason(name)] if reason and reason not in message]
        if POLL_FAILED in message:
            extra += server.log_errors(mark)
        raise TritonLoadError(name, message, extra)

    def index_reason(self, name: str) -> str | None:
        """The reason the repository index gives for the model's state, if any."""
        try:
            index = self.clients["http"].get_model_repository_index()
        except Exception:
            return None
        return next((entry.get("reason") for entry in index if entry.get("name") == name), None)

    def infer(self, protocol: str, model: str, inputs: list[tuple[TensorSpec, np.ndarray]],
              outputs: list[str], request_id: str = "") -> list[np.ndarray]:
        module = self.modules[protocol]
        tensors = []
        for spec, array in inputs:
            tensor = module.InferInput(spec.name, list(array.shape), spec.datatype)
            tensor.set_data_from_numpy(array)
            tensors.append(tensor)
        requested = [module.InferRequestedOutput(name) for name in outputs]
        deadline = {"client_timeout": self.timeout} if protocol == "grpc" else {}
        result = self.clients[protocol].infer(model, tensors, outputs=requested, request_id=request_id, **deadline)
        return [result.as_numpy(name) for name in outputs]

    def statistics(self, model: str, settle: float = 2.0) -> "Statistics":
        """The server's counters for the model since it loaded, once two reads 50 ms apart agree (at most
        `settle` seconds): the server counts a request after it has answered it."""
        def read() -> Statistics:
            stats = self.clients["http"].get_inference_statistics(model)["model_stats"][0]
            return Statistics(stats["execution_count"], stats["inference_count"],
                              {one["batch_size"]: one["compute_infer"]["count"] for one in stats["batch_stats"]})

        deadline = time.monotonic() + settle
        last = read()
        while time.monotonic() < deadline:
            time.sleep(0.05)
            now = read()
            if now == last:
                break
            last = now
        return last

    def instance_kind(self, model: str) -> str | None:
        """Where the server runs the model: KIND_CPU or KIND_GPU, from the config it loaded."""
        groups = self.clients["http"].get_model_config(model).get("instance_group", [])
        return groups[0].get("kind") if groups else None

    def unload(self, name: str) -> None:
        try:
            self.clients["grpc"].unload_model(name, client_timeout=self.timeout)
        except Exception:
            pass  # the server may be gone already; nothing is left to unload then

    def close(self) -> None:
        for client in self.clients.values():
            client.close()

