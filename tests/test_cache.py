"""The result cache: an unchanged run is served from it, any change to what a verdict depends on is not."""

import hashlib
import json
import os
import shutil
import subprocess
import sys
from pathlib import Path

import pytest

from tests.conftest import MODELS, cache_dir, run_cli, run_json, verdicts

STAGES = "jit_script,onnxruntime"


def run_cli_script(script: Path):
    return subprocess.run([sys.executable, str(script)], capture_output=True, text=True, timeout=300)


def cached(report):
    return {stage["name"]: stage["cached"] for stage in report["stages"]}


def test_second_run_is_served_from_the_cache_and_a_change_is_not(tmp_path):
    model = tmp_path / "model" / "net.py"
    model.parent.mkdir()
    shutil.copy(MODELS / "where_scatter_gather.py", model)

    first_dir, second_dir = tmp_path / "a", tmp_path / "b"
    first_dir.mkdir(), second_dir.mkdir()
    cold_art, warm_art = tmp_path / "cold-art", tmp_path / "art"
    _, first = run_json(first_dir, "run", str(model), "--stages", STAGES, "--artifacts", str(cold_art))
    assert not any(cached(first).values()) and first["workers"] == 1
    assert all(stage["cached_from"] is None for stage in first["stages"])
    assert first["dependencies"] == {str(model): hashlib.sha256(model.read_bytes()).hexdigest()}

    proc, second = run_json(second_dir, "run", str(model), "--stages", STAGES, "--artifacts", str(warm_art))
    assert all(cached(second).values()) and second["workers"] == 0
    assert verdicts(second) == verdicts(first)
    assert second["stages"][1]["max_abs_error"] == first["stages"][1]["max_abs_error"]
    assert all(stage["cached_from"] == {"computed_at": first["created"], "tool_version": first["tool_version"],
                                        "log_cut": 0} for stage in second["stages"] if stage["status"] != "skip")
    assert "pass (cached)" in proc.stdout
    # A cached run leaves what a cold one leaves: artifacts, inputs, reproducers and the computing worker's log.
    assert sorted(p.name for p in warm_art.iterdir()) == sorted(p.name for p in cold_art.iterdir())
    for name in ("inputs.npz", "model.onnx", "worker-0.log", "reproduce_onnxruntime.py"):
        assert (warm_art / name).read_bytes() == (cold_art / name).read_bytes(), name
    reproduced = run_cli_script(warm_art / "reproduce_onnxruntime.py")
    assert reproduced.returncode == 0 and "input set 2: pass" in reproduced.stdout, reproduced.stdout

    # Another option: a different key.
    _, other = run_json(first_dir, "run", str(model), "--stages", STAGES, "--atol", "0.5")
    assert not any(cached(other).values())

    # A changed model file: a different key, even with the same options.
    model.write_text(model.read_text() + "\n# changed\n")
    _, changed = run_json(first_dir, "run", str(model), "--stages", STAGES)
    assert not any(cached(changed).values())

    # A file beside the model that it does not load is not a dependency; the edited model is cached now.
    (model.parent / "helper.py").write_text("SCALE = 2\n")
    _, beside = run_json(first_dir, "run", str(model), "--stages", STAGES)
    assert all(cached(beside).values())

    _, bypass = run_json(first_dir, "run", str(model), "--stages", STAGES, "--no-cache")
    assert not any(cached(bypass).values()) and bypass["workers"] == 1

    info = run_cli("cache", "info", timeout=60)
    assert info.returncode == 0 and " 12 entries, " in info.stdout.splitlines()[0], info.stdout
    assert "  onnxruntime: 3" in info.stdout  # the model as first written, edited, and with --atol 0.5
    cleared = run_cli("cache", "clear", timeout=60)
    assert cleared.returncode == 0 and cleared.stdout.startswith("removed 12 entries")
    assert " 0 entries, " in run_cli("cache", "info", timeout=60).stdout


def test_crashes_are_never_cached(tmp_path):
    from tests.faults.test_stage_faults import HERE

    for _ in range(2):
        _, report = run_json(tmp_path, "run", str(HERE / "dies_when_traced.py"), "--stages", "jit_trace")
        assert verdicts(report)["jit_trace"] == "crash" and not report["stages"][1]["cached"]
    assert report["stages"][0]["cached"], "eager passed and is served from the cache"


def test_a_skip_that_follows_from_cached_verdicts_needs_no_worker(tmp_path):
    _, first = run_json(tmp_path, "run", str(MODELS / "data_dependent_if.py"), "--stages", "onnxruntime")
    _, second = run_json(tmp_path, "run", str(MODELS / "data_dependent_if.py"), "--stages", "onnxruntime")
    assert verdicts(first) == verdicts(second) == {"eager": "pass", "onnx_export": "fail", "onnxruntime": "skip"}
    assert second["workers"] == 0
    assert second["stages"][2]["reason"] == first["stages"][2]["reason"]


CHATTY_MODEL = """\
import torch


class Chatty(torch.nn.Module):
    def forward(self, x):
        print("x" * 2**21)  # 2 MB of output per call
        print("the end of a call")
        return x * 2


def get_model():
    return Chatty()


def get_inputs():
    return [(torch.ones(2, 3),)]
"""


def test_a_cache_entry_keeps_only_the_end_of_a_long_log_and_says_so(tmp_path):
    model = tmp_path / "chatty.py"
    model.write_text(CHATTY_MODEL)
    _, first = run_json(tmp_path, "run", str(model), "--stages", "eager")
    proc, second = run_json(tmp_path, "run", str(model), "--stages", "eager", "--artifacts", str(tmp_path / "art"))
    assert second["workers"] == 0 and second["stages"][0]["cached"], proc.stdout
    cut = second["stages"][0]["cached_from"]["log_cut"]
    assert cut > 2 * 2**21  # eager calls the model more than twice, each call printing 2 MB
    log = (tmp_path / "art" / "worker-0.log").read_text()
    assert log.startswith(f"[compatcheck: the cache keeps the last 8192 bytes of a worker's log; the {cut} before")
    assert "the end of a call" in log and len(log) < 9000
    stored = sum(path.stat().st_size for path in cache_dir().rglob("*") if path.is_file())
    assert stored < 64 * 2**10, f"{stored} bytes cached"


# A model whose activation comes from six places a run depends on; each can switch it to numpy,
# which TorchScript cannot compile: jit_script passes, then must fail once any of them changes.
DEPENDENT_MODEL = '''\
import os

import numpy as np
import torch

import extpkg
import fakepkg
from lib.act import MODE as LIB_MODE

HERE = os.path.dirname(os.path.abspath(__file__))
WEIGHTS = os.path.join(HERE, "..", "weights")


class Relu(torch.nn.Module):
    def forward(self, x):
        return torch.relu(x)


class NumpyRelu(torch.nn.Module):
    def forward(self, x):
        return torch.from_numpy(np.maximum(x.numpy(), 0))


def modes():
    yield LIB_MODE
    yield extpkg.MODE
    yield fakepkg.MODE
    yield os.environ.get("TORCH_FAULT_TEST_ACT", "torch")
    yield "numpy" if torch.load(os.path.join(WEIGHTS, "w.pt"))["numpy"].item() else "torch"
    if os.path.exists(os.path.join(WEIGHTS, "w.safetensors")):
        from safetensors.torch import load_file

        yield "numpy" if load_file(os.path.join(WEIGHTS, "w.safetensors"))["numpy"].item() else "torch"


def get_model():
    return NumpyRelu() if "numpy" in set(modes()) else Relu()


def get_inputs():
    return torch.randn(2, 3)
'''


def _dependent_project(root: Path, loader: str) -> tuple[Path, dict]:
    import torch

    (root / "model" / "lib").mkdir(parents=True)
    (root / "model" / "lib" / "__init__.py").write_text("")
    (root / "model" / "lib" / "act.py").write_text("MODE = 'torch'\n")
    model = root / "model" / "net.py"
    model.write_text(DEPENDENT_MODEL)
    (root / "elsewhere" / "extpkg").mkdir(parents=True)  # user code outside the model's folder
    (root / "elsewhere" / "extpkg" / "__init__.py").write_text("MODE = 'torch'\n")
    site = root / "env" / "site-packages"  # an installed distribution: only its version is in the key
    (site / "fakepkg").mkdir(parents=True)
    (site / "fakepkg" / "__init__.py").write_text("MODE = 'torch'\n")
    (site / "fakepkg-1.0.dist-info").mkdir()
    (root / "weights").mkdir()
    torch.save({"numpy": torch.tensor(False)}, root / "weights" / "w.pt")
    if loader == "safetensors":
        from safetensors.torch import save_file

        save_file({"numpy": torch.tensor(False)}, str(root / "weights" / "w.safetensors"))
    return model, {"PYTHONPATH": f"{root / 'elsewhere'}{os.pathsep}{site}"}


def _switch_to_numpy(root: Path, change: str, env: dict) -> None:
    import torch

    if change == "subfolder package":
        (root / "model" / "lib" / "act.py").write_text("MODE = 'numpy'\n")
    elif change == "package outside the model's folder":
        (root / "elsewhere" / "extpkg" / "__init__.py").write_text("MODE = 'numpy'\n")
    elif change == "upgraded distribution":
        site = root / "env" / "site-packages"
        (site / "fakepkg" / "__init__.py").write_text("MODE = 'numpy'\n")
        (site / "fakepkg-1.0.dist-info").rename(site / "fakepkg-2.0.dist-info")
    elif change == "TORCH_ variable":
        env["TORCH_FAULT_TEST_ACT"] = "numpy"
    elif change == "torch.load weights":
        torch.save({"numpy": torch.tensor(True)}, root / "weights" / "w.pt")
    elif change == "safetensors weights":
        from safetensors.torch import save_file

        save_file({"numpy": torch.tensor(True)}, str(root / "weights" / "w.safetensors"))


@pytest.mark.slow
@pytest.mark.parametrize("change", ["subfolder package", "package outside the model's folder", "upgraded distribution",
                                    "TORCH_ variable", "torch.load weights", "safetensors weights"])
def test_a_changed_dependency_is_never_served_from_the_cache(tmp_path, change):
    if change == "safetensors weights":
        pytest.importorskip("safetensors")
    model, env = _dependent_project(tmp_path, "safetensors" if change == "safetensors weights" else "torch")
    out = tmp_path / "report.json"

    def run():
        proc = run_cli("run", str(model), "--stages", "jit_script", "--json", str(out), "--quiet", env=env)
        assert out.exists(), proc.stdout + proc.stderr
        return json.loads(out.read_text())

    first = run()
    assert verdicts(first) == {"eager": "pass", "jit_script": "pass"} and not any(cached(first).values())
    _switch_to_numpy(tmp_path, change, env)
    second = run()
    assert verdicts(second) == {"eager": "pass", "jit_script": "fail"}, second["stages"][1]["reason"]
    assert not any(cached(second).values()) and second["workers"] == 1
