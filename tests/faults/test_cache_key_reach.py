"""The model under test cannot forge cache entries: its worker holds no key in its environment, and
where Landlock is there the key's folder, the cache folder and the parent's environment are out of its
reach. Without Landlock (COMPATCHECK_SANDBOX=off runs the worker as a kernel without it would) the key
is readable, as the docs say, and a forged entry is served: the test shows both. What the sandbox
refuses a model beside those folders is said to be the sandbox's doing."""

import errno
import json
import os
import secrets
import shutil
import tempfile
from pathlib import Path

import pytest

from compatcheck.diagnose.sandbox import refused_entry
from compatcheck.protocol import SandboxFolders
from compatcheck.session.sandbox import KEPT, Sandbox, landlock_abi
from tests.conftest import ROOT, cache_dir, run_json

@pytest.fixture
def outside_tmp(monkeypatch):
    """The test's cache and key under /var/tmp: under /tmp the sandbox stands down (docs: Isolation and
    safety), as it does for the rest of the suite's private caches."""
    base = Path(tempfile.mkdtemp(prefix="compatcheck-sandbox-test-", dir="/var/tmp"))
    monkeypatch.setenv("COMPATCHECK_CACHE_DIR", str(base / "cache"))
    monkeypatch.setenv("XDG_STATE_HOME", str(base / "state"))
    yield base
    shutil.rmtree(base, ignore_errors=True)


HOSTILE = ROOT / "tests" / "faults" / "models" / "forges_cache_entry.py"
VICTIM = """\
import torch


def get_model():
    return torch.nn.Linear(3, 2)


def get_inputs():
    return [torch.randn(2, 3)]
"""


@pytest.mark.parametrize("sandbox", ["on", "off"])
def test_a_model_cannot_sign_an_entry_for_another_model(tmp_path, monkeypatch, outside_tmp, sandbox):
    if sandbox == "on" and not landlock_abi():
        pytest.skip("this kernel has no Landlock: only the environment is scrubbed (docs: Isolation and safety)")
    state, cache = Path(os.environ["XDG_STATE_HOME"]), cache_dir()
    key = secrets.token_hex(32)
    (state / "compatcheck").mkdir(parents=True, mode=0o700)
    (state / "compatcheck" / "cache.key").write_text(key + "\n")
    (state / "compatcheck" / "cache.key").chmod(0o600)
    monkeypatch.setenv("COMPATCHECK_CACHE_KEY", key)  # the key in the parent's environment too
    monkeypatch.setenv("COMPATCHECK_SANDBOX", sandbox)
    victim = tmp_path / "victim.py"
    victim.write_text(VICTIM)
    _, first = run_json(tmp_path, "run", str(victim), "--stages", "eager", "--no-cache")
    cache.mkdir()
    found = tmp_path / "found.json"
    for name, value in {"FORGE_STATE": state, "FORGE_CACHE": cache, "FORGE_VICTIM_KEY": first["run_key"],
                        "FORGE_REPORT": found}.items():
        monkeypatch.setenv(name, str(value))
    _, hostile = run_json(tmp_path, "run", str(HOSTILE), "--stages", "eager")
    attack = json.loads(found.read_text())
    _, served = run_json(tmp_path, "run", str(victim), "--stages", "eager")
    eager = served["stages"][0]
    assert attack["environment"] is None  # the worker's own environment holds no key either way
    assert set(attack["variables"]) <= KEPT and "COMPATCHECK_RUN" in attack["variables"]
    assert attack["parent's environment"] == ""  # blanked in the block /proc/<pid>/environ shows
    if sandbox == "on":
        assert hostile["environment"]["cache key"].startswith("out of the model's reach (Landlock ABI")
        assert attack["key file"] == "denied: Permission denied"
        assert attack["cache folder"] == "denied: Permission denied" and attack["forged"] == "no key"
        assert not eager["cached"] and eager["reason"] != "FORGED"  # computed afresh
    else:
        assert hostile["environment"]["cache key"].startswith("readable by the model under test: "
                                                              "COMPATCHECK_SANDBOX=off")
        assert attack["key file"] == key
        assert attack["cache folder"] == "written" and attack["forged"] == "stored"
        assert eager["cached"] and eager["reason"] == "FORGED"  # what the docs warn of


MAKES_A_FILE = """\
import torch


class Model(torch.nn.Module):
    def forward(self, x):
        with open({path!r}, "w") as made:
            made.write("new")
        return x * 2


def get_model():
    return Model()


def get_inputs():
    return [torch.randn(2, 3)]
"""


def test_a_file_the_sandbox_refuses_is_said_to_be_the_sandboxs(write_model, outside_tmp):
    if not landlock_abi():
        pytest.skip("this kernel has no Landlock: nothing is refused")
    made = cache_dir().parent / "made-during-the-run.txt"  # its folder is on the way to the cache
    model = write_model(MAKES_A_FILE.format(path=str(made)))
    _, report = run_json(model.parent, "run", str(model), "--stages", "eager", "--no-cache")
    eager = report["stages"][0]
    assert eager["status"] == "fail" and not made.exists()
    first = eager["findings"][0]
    assert first["kind"] == "sandbox-denied" and first["file"].endswith("model.py")
    assert f"refused to create {os.path.realpath(made.parent)}/{made.name}" in first["message"]
    assert "mkdir -p" in first["message"] and "COMPATCHECK_SANDBOX=off" in first["message"]
    assert {phase["name"]: phase["outcome"] for phase in eager["phases"]}["diagnosis"] == "ran"


def test_only_a_new_entry_in_a_folder_the_sandbox_keeps_is_its_refusal(tmp_path):
    kept, protected = tmp_path / "kept", tmp_path / "kept" / "cache"
    kept.mkdir()
    (kept / "there-before").write_text("")
    folders = SandboxFolders(refusing=[str(kept)], protected=[str(protected)])

    def refused(error, where=folders):
        wrapped = RuntimeError("building failed")  # found anywhere in the cause chain
        wrapped.__cause__ = error
        return refused_entry(where, wrapped)

    def denied(path):
        return PermissionError(errno.EACCES, "Permission denied", str(path))

    assert refused(denied(kept / "new")) == str(kept / "new")
    assert refused(PermissionError(f"cannot create '{kept / 'new'}'")) == str(kept / "new")  # named in its message
    assert refused(OSError(errno.ENOENT, "No such file", str(kept / "new"))) is None  # refused otherwise
    assert refused(denied(kept / "there-before")) is None  # granted when the worker started
    assert refused(denied(protected)) is None and refused(denied(kept / "new" / "deeper")) is None
    assert refused(denied(tmp_path / "new")) is None  # not a folder the sandbox keeps
    assert refused(denied(kept / "new"), where=SandboxFolders()) is None  # no sandbox


def test_under_tmp_the_sandbox_stands_down_and_says_so(tmp_path, monkeypatch):
    monkeypatch.setenv("COMPATCHECK_CACHE_DIR", str(tmp_path / "cache"))  # /tmp: what programs name outright
    monkeypatch.setenv("XDG_STATE_HOME", str(tmp_path / "state"))
    sandbox = Sandbox.here()
    if str(tmp_path).startswith(os.path.realpath("/tmp")):
        assert sandbox.abi is None and sandbox.ruleset() is None
        assert sandbox.describe().startswith(f"readable by the model under test: {tmp_path / 'state' / 'compatcheck'} is under /tmp")
    given = {"COMPATCHECK_CACHE_KEY": "k" * 64, "COMPATCHECK_CACHE_DIR": "/c", "COMPATCHECK_RUN": "r", "PATH": "/bin"}
    kept = sandbox.environment(given, tmp_path)
    assert [name for name in kept if name.startswith("COMPATCHECK_")] == ["COMPATCHECK_RUN"] and kept["PATH"] == "/bin"
