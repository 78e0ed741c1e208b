"""A content-addressed cache of stage results, so an unchanged model is not run again.

The key of a stage is a hash of everything its verdict depends on: compatcheck's version, the
model file and the Python files beside it, the factory, the options (and the --rewrites catalog's
contents), the interpreter and the
versions of torch, onnx, onnxruntime and the other packages, and the stage's name. Change any of
them and the key changes: a stale entry can never be served. Only verdicts that a rerun would
repeat are stored (pass, mismatch, fail); crashes, timeouts and skips are always run again.
"""

from __future__ import annotations

import hashlib
import json
import os
import shutil
import sys
import tempfile
from pathlib import Path

from compatcheck import __version__
from compatcheck.environment import PACKAGES, versions
from compatcheck.options import RunOptions
from compatcheck.report.model import ModelInfo, StageResult, Status

CACHEABLE = {Status.PASS, Status.MISMATCH, Status.FAIL}
_EXTRA_PACKAGES = ("nvidia-pytriton", "onnx-ir")


def default_dir() -> Path:
    if os.environ.get("COMPATCHECK_CACHE_DIR"):
        return Path(os.environ["COMPATCHECK_CACHE_DIR"])
    base = Path(os.environ.get("XDG_CACHE_HOME") or Path.home() / ".cache")
    return base / "compatcheck" / "stages"


class StageCache:
    def __init__(self, root: Path, model: Path, factory: str, options: RunOptions):
        self.root = root
        digest = hashlib.sha256()
        for path in [model, *sorted(p for p in model.parent.glob("*.py") if p != model)]:
            digest.update(path.name.encode() + b"\0" + path.read_bytes() + b"\0")
        if options.rewrites:  # findings carry its rewrites: an edited catalog is a different result
            digest.update(Path(options.rewrites).read_bytes())
        settings = options.model_dump(exclude={"stages"})
        facts = {"compatcheck": __version__, "factory": factory, "options": settings,
                 "python": sys.version, "executable": sys.executable, "packages": versions(PACKAGES + _EXTRA_PACKAGES)}
        digest.update(json.dumps(facts, sort_keys=True, default=str).encode())
        self.base = digest.hexdigest()

    def _entry(self, stage: str) -> Path:
        return self.root / hashlib.sha256(f"{self.base}:{stage}".encode()).hexdigest()[:32]

    def load(self, stage: str, workdir: Path) -> tuple[StageResult, ModelInfo, dict] | None:
        """A stored result with its artifacts copied into workdir, or None."""
        entry = self._entry(stage)
        try:
            stored = json.loads((entry / "entry.json").read_text())
            result = StageResult.model_validate(stored["result"])
            for key, name in stored["artifacts"].items():
                target = workdir / name
                shutil.copyfile(entry / name, target)
                result.artifacts[key] = str(target)
            return result, ModelInfo.model_validate(stored["model"]), stored["environment"]
        except (OSError, ValueError, KeyError):
            return None

    def store(self, result: StageResult, model: ModelInfo, environment: dict) -> None:
        if result.status not in CACHEABLE:
            return
        entry = self._entry(result.name)
        self.root.mkdir(parents=True, exist_ok=True)
        staging = Path(tempfile.mkdtemp(prefix=".staging-", dir=self.root))
        try:
            names = {}
            for key, path in result.artifacts.items():
                names[key] = Path(path).name
                shutil.copyfile(path, staging / names[key])
            stored = {"result": result.model_dump(mode="json", exclude={"artifacts"}), "artifacts": names,
                      "model": model.model_dump(mode="json"), "environment": environment}
            (staging / "entry.json").write_text(json.dumps(stored))
            shutil.rmtree(entry, ignore_errors=True)
            os.replace(staging, entry)  # whole entries appear at once, never half-written
        except OSError:
            shutil.rmtree(staging, ignore_errors=True)
