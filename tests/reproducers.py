"""Runs the reproducers of an example model's shared run (tests/shared_runs.py) in one fresh process, as
`python reproduce_<stage>.py` would run each, one after the other, without paying torch's imports again for
every model.

One process per suite worker imports what every reproducer imports (torch, torch._dynamo, the ONNX exporter
and the onnxscript functions it translates with, compatcheck's Reproduction), then forks a child per
model: the child starts with those modules as a fresh import leaves them and nothing another model's
reproducers did, runs each script as `__main__` with its own argv, and writes what each printed and its exit
code."""

from __future__ import annotations

import json
import os
import select
import signal
import subprocess
import sys
import threading
from pathlib import Path

TIMEOUT = 900

# The forking process: reads one JSON request per line ({"scripts", "cwd", "out"}), and writes a line once
# the child has written {script: {"code", "stdout"}} to `out` and ended.
SERVER = r"""
import contextlib, io, json, os, runpy, sys, traceback
import torch, torch._dynamo, torch.export, torch.onnx, onnx
from compatcheck.worker import reproduce
try:  # the functions the exporter translates with: imported once; each export reads their signatures anew
    import onnxscript.function_libs.torch_lib.ops
except Exception:  # an onnxscript that keeps them elsewhere: the first export imports them
    pass

def run(script):
    out, code = io.StringIO(), 0
    sys.argv, sys.path[0] = [script], os.path.dirname(script)
    with contextlib.redirect_stdout(out):
        try:
            runpy.run_path(script, run_name="__main__")
        except SystemExit as exc:
            code = exc.code if isinstance(exc.code, int) else (0 if exc.code is None else 1)
        except BaseException:
            traceback.print_exc(file=out)
            code = 1
    return {"code": code, "stdout": out.getvalue()}

for line in sys.stdin:
    request = json.loads(line)
    pid = os.fork()
    if pid == 0:
        try:
            os.dup2(os.open(os.devnull, os.O_RDONLY), 0)
            os.chdir(request["cwd"])
            results = {script: run(script) for script in request["scripts"]}
            with open(request["out"], "w") as out:
                json.dump(results, out)
        finally:
            os._exit(0)
    os.waitpid(pid, 0)
    print(flush=True)
"""


class Reproducers:
    """The forking process of this suite worker, started on first use with that call's `environ` (the shared
    runs pass the session's environment every time) and kept for every later call."""

    _lock = threading.Lock()
    _process: subprocess.Popen | None = None

    def __init__(self, environ: dict):
        self.environ = environ

    def run(self, scripts: list[Path], cwd: Path) -> dict[str, dict]:
        """{script: {"code": its exit code, "stdout": what it printed}} for each script, run in turn in `cwd`."""
        out = cwd / "reproduced.json"
        with self._lock:
            server = self._server()
            server.stdin.write(json.dumps({"scripts": [str(s) for s in scripts], "cwd": str(cwd), "out": str(out)}))
            server.stdin.write("\n")
            server.stdin.flush()
            if not select.select([server.stdout], [], [], TIMEOUT)[0]:
                os.killpg(server.pid, signal.SIGKILL)  # and the child it forked
                raise AssertionError(f"the reproducers ran past {TIMEOUT} s")
            assert server.stdout.readline(), "the reproducers' process ended"
        assert out.exists(), "the reproducers' process wrote no results"
        return json.loads(out.read_text())

    def _server(self) -> subprocess.Popen:
        if Reproducers._process is None or Reproducers._process.poll() is not None:
            Reproducers._process = subprocess.Popen(
                [sys.executable, "-c", SERVER], stdin=subprocess.PIPE, stdout=subprocess.PIPE,
                stderr=subprocess.DEVNULL, text=True, env=self.environ, start_new_session=True)
        return Reproducers._process
