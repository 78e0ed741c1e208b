import os
import signal
import time
import uuid
from pathlib import Path

import pytest

MARK = "FAULT_TEST_RUN"
# What torch (inductor's per-user cache) and onnxruntime (a session id) keep in the temp folder
# for every process of the user, not for one run.
LIBRARY_FILES = ("torchinductor_", ".ses")


def processes_with(mark: str) -> list[int]:
    """PIDs whose environment carries MARK=mark: every process a run started, and what they started."""
    needle = f"\0{MARK}={mark}\0".encode()
    found = []
    for entry in Path("/proc").iterdir():
        if entry.name.isdigit():
            try:
                if needle in b"\0" + (entry / "environ").read_bytes():
                    found.append(int(entry.name))
            except OSError:
                continue
    return found


def wait_until_hanging(flag: Path, proc, seconds: float = 120) -> None:
    """Waits for a hanging test model to create `flag`: its stage is under way (a fixed sleep is not
    enough on a loaded machine)."""
    deadline = time.monotonic() + seconds
    while not flag.exists() and proc.poll() is None and time.monotonic() < deadline:
        time.sleep(0.05)
    assert flag.exists(), "the run never reached the stage that hangs"


def poll_until_empty(pids_of, seconds: float = 10):
    """Polls `pids_of()` (a list or dict of processes) until it is empty or `seconds` pass; returns what
    is left."""
    deadline = time.monotonic() + seconds
    while pids_of() and time.monotonic() < deadline:
        time.sleep(0.05)
    return pids_of()


@pytest.fixture
def leaves_nothing(tmp_path, monkeypatch):
    """Runs started in the test get a private TMPDIR and an inherited mark; when the test ends, no
    process with the mark and no temporary folder may remain. Returns the mark."""
    mark = uuid.uuid4().hex
    tmp = tmp_path / "tmp"
    tmp.mkdir()
    monkeypatch.setenv("TMPDIR", str(tmp))
    monkeypatch.setenv(MARK, mark)
    yield mark
    left = poll_until_empty(lambda: processes_with(mark))  # a killed process is gone from /proc once reaped
    for pid in left:  # so a failing test does not leave them to the next
        try:
            os.kill(pid, signal.SIGKILL)
        except ProcessLookupError:
            pass
    assert left == [], "processes of the run are still alive"
    assert [name for name in os.listdir(tmp) if not name.startswith(LIBRARY_FILES)] == [], \
        "temporary folders of the run remain"
