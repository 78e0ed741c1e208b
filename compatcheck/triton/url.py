"""`--triton url`: a server that is already running, which must be in explicit model-control mode.

It may not see our disk, so the model is loaded with its config and files in the load request, under
a name of its own, and unloaded afterwards; the server itself is left as it was.
"""

from __future__ import annotations

from compatcheck.triton.errors import TritonError
from compatcheck.triton.launcher import Launcher, http_ok


def addresses(url: str) -> tuple[str, str]:
    """'HOST:PORT[,HOST:PORT]' -> (HTTP, gRPC) host:port; gRPC defaults to the HTTP port + 1, as in Triton."""
    http, _, grpc = (part.strip() for part in url.partition(","))
    http = http.removeprefix("http://").rstrip("/")
    host, _, port = http.rpartition(":")
    if not host or not port.isdigit():
        raise ValueError(f"expected HOST:PORT for the HTTP endpoint, got {url!r}")
    return http, grpc.removeprefix("grpc://") or f"{host}:{int(port) + 1}"


class UrlLauncher(Launcher):
    kind = "url"
    remote = True

    def __init__(self, url: str):
        self.http_url, self.grpc_url = addresses(url)

    @staticmethod
    def unavailable(url: str | None) -> str | None:
        if not url:
            return "--triton url needs --triton-url HOST:PORT"
        try:
            http, _ = addresses(url)
        except ValueError as exc:
            return f"--triton-url: {exc}"
        if not http_ok(http, "/v2/health/live"):
            return f"no Triton server answers at http://{http}"
        return None

    def describe(self) -> str:
        return f"the server at {self.http_url}"

    def start(self) -> tuple[str, str]:
        if not http_ok(self.http_url, "/v2/health/ready"):
            raise TritonError(f"{self.describe()} is not ready")
        return self.http_url, self.grpc_url
