"""Environments: what their key holds, when they are reused or rebuilt, and how pip or uv is told to install."""

import os
import subprocess
import sys
import time

import pytest

from compatcheck.matrix import environments
from compatcheck.matrix.config import Environment
from compatcheck.matrix.environments import BuildError, ensure, env_key, key_inputs


def test_the_environments_pins_win_over_compatchecks_own_ranges():
    wanted = environments.requirements(Environment(requirements=["Torch==2.14.1", "onnxruntime==1.31.*"]))
    assert wanted[:2] == ["Torch==2.14.1", "onnxruntime==1.31.*"]
    names = [r.split("<")[0].split(">")[0].split("=")[0] for r in wanted[2:]]
    assert "torch" not in names and "onnxruntime" not in names and {"onnx", "pydantic", "numpy"} <= set(names)


def test_an_environment_gets_the_cpu_onnxruntime_unless_it_names_one():
    wanted = environments.requirements(Environment(requirements=["torch==2.13.0"]))
    names = [r.split("<")[0].split(">")[0].split("=")[0] for r in wanted]
    assert "onnxruntime" in names and "onnxruntime-gpu" not in names


def test_the_key_follows_what_is_installed_not_the_name():
    base = Environment(requirements=["torch==2.13.0"])
    key = env_key(key_inputs(base))
    assert key == env_key(key_inputs(Environment(requirements=["torch==2.13.0"])))
    for changed in (Environment(requirements=["torch==2.14.1"]),
                    Environment(requirements=["torch==2.13.0"], find_links=["/wheels"]),
                    Environment(requirements=["torch==2.13.0"], pre=True)):
        assert env_key(key_inputs(changed)) != key
    inputs = key_inputs(base)
    assert inputs["python_version"].startswith(sys.version.split()[0])
    assert any(r.startswith("onnx") for r in inputs["requirements"])  # compatcheck's own list is in it


@pytest.fixture
def fake_build(monkeypatch):
    """Builds that only make the folder (and fail on request), so reuse can be tested without pip."""
    runs = []

    def commands(env, path, python, tool, constraint):
        runs.append(path)
        fail = "broken" in env.requirements
        return [[sys.executable, "-c", "import sys, os; os.makedirs(sys.argv[1]); sys.exit(sys.argv[2] == 'True')",
                 str(path), str(fail)]], {}

    monkeypatch.setattr(environments, "commands", commands)
    monkeypatch.setattr(environments, "installer", lambda: "pip")
    return runs


def test_an_environment_is_built_once_and_then_reused(tmp_path, fake_build):
    env = Environment(requirements=["torch==2.13.0"])
    first = ensure("a", env, tmp_path)
    assert not first.reused and first.path == (tmp_path / first.key).resolve()
    assert (first.path / environments.MARKER).is_file()
    again = ensure("b", env, tmp_path)
    assert again.reused and again.path == first.path and len(fake_build) == 1
    assert again.seconds == first.seconds and again.installer == "pip"  # the build it saves
    other = ensure("a", Environment(requirements=["torch==2.14.1"]), tmp_path)
    assert not other.reused and other.path != first.path


def test_an_unpinned_environment_is_resolved_again_once_stale_into_a_new_folder(tmp_path, fake_build):
    pinned = Environment(requirements=["torch==2.13.0"])
    nightly = Environment(requirements=["torch>=2.14"], refresh_after=1)
    assert environments.pinned(pinned) and not environments.pinned(nightly)
    assert not environments.pinned(Environment(requirements=["torch==2.13.0"], pre=True))
    first = ensure("nightly", nightly, tmp_path)
    assert ensure("nightly", nightly, tmp_path).reused
    marker = first.path / environments.MARKER
    os.utime(marker, (time.time() - 7200, time.time() - 7200))  # built two hours ago: past refresh_after
    second = ensure("nightly", nightly, tmp_path)
    assert not second.reused and second.path != first.path
    assert (tmp_path / second.key).resolve() == second.path
    assert first.path.is_dir(), "the build a running matrix (this process) holds is kept"
    on_demand = ensure("nightly", nightly, tmp_path, refresh=True)
    assert not on_demand.reused and on_demand.path not in (first.path, second.path)
    # A pinned environment is not rebuilt however old, unless asked.
    old = ensure("pinned", pinned, tmp_path)
    os.utime(old.path / environments.MARKER, (0, 0))
    assert ensure("pinned", pinned, tmp_path).reused


def test_a_build_no_running_matrix_holds_is_removed_after_a_refresh(tmp_path, fake_build):
    env = Environment(requirements=["torch>=2.14"])
    finished = ensure("x", env, tmp_path)
    finished._held.close()  # the matrix that used it has ended
    fresh = ensure("x", env, tmp_path, refresh=True)
    assert not finished.path.exists() and fresh.path.is_dir()


def test_a_half_built_environment_is_never_reused(tmp_path, fake_build):
    env = Environment(requirements=["torch==2.13.0"])
    path = tmp_path / env_key(key_inputs(env))
    path.mkdir()
    (path / "left-over").write_text("")
    built = ensure("a", env, tmp_path)
    assert not built.reused and not (path / "left-over").exists()


def test_a_failed_build_says_where_its_log_is_and_leaves_no_marker(tmp_path, fake_build):
    env = Environment(requirements=["broken"])
    with pytest.raises(BuildError, match=r"exited with status 1; the end of .*\.log"):
        ensure("a", env, tmp_path)
    key = env_key(key_inputs(env))
    assert not (tmp_path / key / environments.MARKER).exists()
    assert (tmp_path / f"{key}.log").read_text().startswith("$ ")


def test_pip_gets_only_the_environments_options_as_it_reads_the_users_configuration_itself(tmp_path):
    env = Environment(requirements=["torch"], index_url="https://i/simple", find_links=["/w"], pre=True)
    steps, variables = environments.commands(env, tmp_path / "e", "/usr/bin/python3.11", "pip", tmp_path / "c.txt")
    assert steps[0] == ["/usr/bin/python3.11", "-m", "venv", str(tmp_path / "e")]
    assert steps[1][:4] == [str(tmp_path / "e/bin/python"), "-m", "pip", "install"]
    assert steps[1][4:10] == ["--index-url", "https://i/simple", "--find-links", "/w", "--pre", "torch"]
    # the configured constraint files, filtered, replace pip's own list (the variable wins over its config)
    assert variables == {"PIP_CONSTRAINT": str(tmp_path / "c.txt")} and (tmp_path / "c.txt").is_file()


PIP_CONFIG = """\
global.cert='/etc/ssl/ca.pem'
global.constraint='/etc/pip/constraints.txt'
global.extra-index-url='file:///a/simple file:///b/simple'
global.index-url='https://global/simple'
install.index-url='https://install/simple'
:env:.find-links='/opt/wheels'
"""


def test_uv_is_told_the_users_pip_configuration(tmp_path, monkeypatch):
    monkeypatch.setattr(environments.subprocess, "run",
                        lambda *a, **k: subprocess.CompletedProcess(a, 0, stdout=PIP_CONFIG, stderr=""))
    config = environments.pip_config()
    assert config["index-url"] == ["https://install/simple"]  # the install section over the global one
    env = Environment(requirements=["torch==2.14.1"], extra_index_urls=["https://extra/simple"])
    options = environments.uv_options(env, config, tmp_path / "c.txt")
    assert options == ["--index-strategy", "unsafe-best-match", "--index-url", "https://install/simple",
                       "--extra-index-url", "file:///a/simple", "--extra-index-url", "file:///b/simple",
                       "--extra-index-url", "https://extra/simple", "--find-links", "/opt/wheels",
                       "--constraint", str(tmp_path / "c.txt")]
    own = environments.uv_options(Environment(index_url="https://mine/simple", pre=True), config, tmp_path / "c")
    assert own[2:4] == ["--index-url", "https://mine/simple"] and own[-2:] == ["--prerelease", "allow"]
    monkeypatch.setattr(environments, "uv", lambda: "/opt/bin/uv")
    steps, variables = environments.commands(env, tmp_path / "e", "/usr/bin/python3.11", "uv", tmp_path / "c.txt")
    assert steps[0] == ["/opt/bin/uv", "venv", "--python", "/usr/bin/python3.11", str(tmp_path / "e")]
    assert steps[1][:5] == ["/opt/bin/uv", "pip", "install", "--python", str(tmp_path / "e/bin/python")]
    assert variables == {"SSL_CERT_FILE": "/etc/ssl/ca.pem"}


def test_the_installer_is_uv_when_on_path_unless_told(monkeypatch):
    monkeypatch.delenv("COMPATCHECK_INSTALLER", raising=False)
    monkeypatch.setattr(environments.shutil, "which", lambda name: "/bin/uv" if name == "uv" else None)
    assert environments.installer() == "uv"
    monkeypatch.setenv("COMPATCHECK_INSTALLER", "pip")
    assert environments.installer() == "pip"
    monkeypatch.setenv("COMPATCHECK_INSTALLER", "conda")
    with pytest.raises(BuildError, match="must be uv or pip"):
        environments.installer()


def test_a_configured_cap_does_not_overrule_what_the_environment_names(tmp_path):
    capped = tmp_path / "constraints.txt"
    capped.write_text("# a machine-wide cap\ntorch<=2.14.1\ntorchvision<=0.29.1\n")
    config = {"constraint": [str(capped), str(tmp_path / "gone.txt")]}  # a configured file may be missing
    out = environments.constraints(Environment(requirements=["torch==2.15.0"]), config, tmp_path / "a.txt")
    assert "torch<" not in out.read_text() and "torchvision<=0.29.1" in out.read_text().splitlines()
    out = environments.constraints(Environment(requirements=["onnx"]), config, tmp_path / "b.txt")
    assert {"torch<=2.14.1", "torchvision<=0.29.1"} <= set(out.read_text().splitlines())


def test_uv_beside_this_interpreter_is_found_without_path(tmp_path, monkeypatch):
    monkeypatch.delenv("COMPATCHECK_INSTALLER", raising=False)
    monkeypatch.setattr(environments.shutil, "which", lambda name: None)
    bin_dir = tmp_path / "bin"
    bin_dir.mkdir()
    monkeypatch.setattr(environments.sys, "executable", str(bin_dir / "python"))
    assert environments.uv() is None and environments.installer() == "pip"
    (bin_dir / "uv").write_text("#!/bin/sh\n")
    (bin_dir / "uv").chmod(0o755)
    assert environments.uv() == str(bin_dir / "uv") and environments.installer() == "uv"


def test_an_index_that_does_not_answer_is_named_and_local_ones_are_not_asked(tmp_path):
    import socket

    with socket.socket() as probe:  # a port nothing listens on
        probe.bind(("127.0.0.1", 0))
        port = probe.getsockname()[1]
    env = Environment(requirements=["torch"], index_url=f"http://127.0.0.1:{port}/simple",
                      extra_index_urls=[f"file://{tmp_path}"], pre=True, optional=True)
    assert environments.unreachable(env).startswith(f"http://127.0.0.1:{port}/simple cannot be reached")
    assert environments.unreachable(Environment(requirements=["torch"], find_links=[str(tmp_path)])) is None
