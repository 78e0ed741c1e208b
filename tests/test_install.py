"""The install a user runs resolves to exactly one onnxruntime: onnxruntime and onnxruntime-gpu both install the
`onnxruntime` module, so an environment with both has one of them broken."""

import json
import subprocess
import sys
import sysconfig
import venv
from pathlib import Path

import pytest

from tests.conftest import ROOT

ONNXRUNTIMES = {"onnxruntime", "onnxruntime-gpu"}


def fresh_venv(path: Path) -> Path:
    """A venv without pip (this interpreter's pip resolves for it, with --python) that sees this environment's
    distributions as installed, all but compatcheck and the onnxruntimes: pip then fetches no metadata for torch
    and the rest, and the onnxruntime in the resolution is the one the install asks for."""
    venv.EnvBuilder(with_pip=False).create(path)
    shadow = path / "shadow"
    shadow.mkdir()
    here = Path(sysconfig.get_paths()["purelib"])
    for info in here.glob("*.dist-info"):
        name = info.name.partition("-")[0].lower().replace("_", "-")
        if name not in ONNXRUNTIMES | {"compatcheck"}:
            (shadow / info.name).symlink_to(info)
    purelib = Path(sysconfig.get_path("purelib", vars={"base": str(path), "platbase": str(path)}))
    (purelib / "shadow.pth").write_text(f"{shadow}\n")
    return path / "bin" / "python"


@pytest.mark.slow
def test_the_cpu_and_the_gpu_install_each_resolve_exactly_one_onnxruntime(tmp_path):
    python = fresh_venv(tmp_path / "venv")
    runs = {extra: subprocess.Popen(
        [sys.executable, "-m", "pip", "--python", str(python), "install", "--quiet", "--dry-run",
         "--report", str(tmp_path / f"{extra}.json"), f".[{extra}]"],
        cwd=ROOT, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True) for extra in ("cpu", "gpu")}
    for extra, proc in runs.items():
        _, err = proc.communicate(timeout=600)
        assert proc.returncode == 0, err[-3000:]
    resolved = {extra: {item["metadata"]["name"].lower() for item in
                        json.loads((tmp_path / f"{extra}.json").read_text())["install"]} for extra in runs}
    assert resolved["cpu"] & ONNXRUNTIMES == {"onnxruntime"}
    assert resolved["gpu"] & ONNXRUNTIMES == {"onnxruntime-gpu"}
    assert "compatcheck" in resolved["cpu"] and "compatcheck" in resolved["gpu"]
