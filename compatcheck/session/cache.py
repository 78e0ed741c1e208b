"""A cache of stage results keyed by what the run really depended on, so a stale verdict is never served.

An entry is found in two steps, the way ccache's manifests work:
1. The run key (`RunKey`) names a folder. It hashes what is known before anything runs:
   - compatcheck's version and the content of its own files (a few milliseconds): another version,
     or a checkout edited since, may decide differently (the seeds every run uses live there too);
   - the model's path and factory, and the options (and the --rewrites catalog's bytes, since
     findings carry its rewrites): they say what was run and how;
   - the interpreter (version and executable): bytecode, C extensions and torch builds differ;
   - every installed distribution's name and version, read from the `*.dist-info`/`*.egg-info`
     folder names (milliseconds): an upgrade of any package the model may use (transformers,
     timm, ...) can change a verdict, and no fixed list can name them all;
   - the environment variables that change how torch, its kernels, onnxruntime, Triton or the
     model behave (TORCH_*, OMP_*, CUDA_*, PYTHONPATH, ...). Values of secret-looking names are
     hashed before they enter the key, and the key's description on disk holds only those hashes.
2. Under it, one entry per state of the run's dependencies: the manifest the worker recorded while
   it ran (see loaded_files.py: the user's Python sources, wherever they were imported from, and
   every file the model read) with a content hash per file. A lookup re-hashes the listed files and
   serves an entry only when every hash matches; a path read relative to the working directory
   also needs the same working directory.

Only verdicts that a rerun would repeat are stored (pass, mismatch, fail); crashes, timeouts and
skips are always run again. An entry holds everything a cold run leaves in --artifacts for the
stage: its artifact, `inputs.npz`, its `reproduce_<stage>.py` and the log of the worker that
computed it.
"""

from __future__ import annotations

import functools
import hashlib
import json
import os
import re
import shutil
import sys
import tempfile
import time
from dataclasses import dataclass
from pathlib import Path

from compatcheck import __version__, redact
from compatcheck.loaded_files import unchanged
from compatcheck.host import RELEVANT
from compatcheck.options import cache_key_values
from compatcheck.report.model import CacheOrigin, ModelInfo, StageResult, Status

CACHEABLE = {Status.PASS, Status.MISMATCH, Status.FAIL}
KEY_VARIABLES = re.compile(
    RELEVANT.pattern + r"|^(PYTHONPATH|PYTHONHASHSEED|LD_LIBRARY_PATH|LD_PRELOAD|KMP_.*|HF_.*|TRANSFORMERS_.*|"
    r"TOKENIZERS_.*|COMPATCHECK_TRITONSERVER)$")
ENTRY = "entry.json"
LOG = "worker.log"


def default_dir() -> Path:
    if os.environ.get("COMPATCHECK_CACHE_DIR"):
        return Path(os.environ["COMPATCHECK_CACHE_DIR"])
    base = Path(os.environ.get("XDG_CACHE_HOME") or Path.home() / ".cache")
    return base / "compatcheck" / "stages"


def distributions() -> list[str]:
    """Every installed distribution as its metadata folder's name ('torch-2.13.0.dist-info')."""
    found = set()
    for folder in sys.path:
        if folder and os.path.isdir(folder) and os.path.realpath(folder) != os.path.realpath(os.getcwd()):
            found.update(name for name in os.listdir(folder) if name.endswith((".dist-info", ".egg-info")))
    return sorted(found)


def key_variables() -> dict[str, str]:
    return {name: "sha256:" + hashlib.sha256(value.encode()).hexdigest() if redact.SECRET_NAME.search(name) else value
            for name, value in sorted(os.environ.items())
            if KEY_VARIABLES.match(name)}


@functools.cache
def own_source() -> str:
    """sha256 over compatcheck's own .py and .yaml files, by path and content."""
    package = Path(__file__).resolve().parents[1]
    digest = hashlib.sha256()
    for path in sorted(p for p in package.rglob("*") if p.suffix in (".py", ".yaml") and "__pycache__" not in p.parts):
        digest.update(str(path.relative_to(package)).encode() + b"\0" + path.read_bytes())
    return digest.hexdigest()


def run_key(model: Path, factory: str, options, payload: bytes | None = None) -> tuple[str, dict]:
    """(the run key, what it hashes); `payload` is a model object's (payload.py): its weights, its
    structure, the classes carried by value and the inputs."""
    facts = {
        "compatcheck": __version__, "compatcheck_source": own_source(), "model": str(model), "factory": factory,
        **({"payload": hashlib.sha256(payload).hexdigest()} if payload is not None else {}),
        "options": cache_key_values(options),
        "rewrites": hashlib.sha256(Path(options.rewrites).read_bytes()).hexdigest() if options.rewrites else None,
        "python": sys.version, "executable": sys.executable, "distributions": distributions(),
        "environment": key_variables(),
    }
    facts = redact.fingerprinted(facts)  # written beside the cache entries: a password in a URL must not be
    return hashlib.sha256(json.dumps(facts, sort_keys=True, default=str).encode()).hexdigest()[:32], facts


@dataclass
class Hit:
    result: StageResult
    model: ModelInfo
    environment: dict
    dependencies: dict
    run: str  # which worker computed it: entries of one worker share its log
    log: Path
    inputs: Path | None


def _copy(source: Path, target: Path) -> None:
    if source.is_dir():
        shutil.copytree(source, target, dirs_exist_ok=True)
    else:
        shutil.copyfile(source, target)


class StageCache:
    def __init__(self, root: Path, model: Path, factory: str, options, payload: bytes | None = None):
        self.root = root
        self.key, self.facts = run_key(model, factory, options, payload)
        self.folder = root / self.key
        self._hashes: dict[str, str | None] = {}  # one hash per file per lookup, shared by every stage

    def load(self, stage: str, workdir: Path) -> Hit | None:
        """The newest entry of `stage` whose dependencies are unchanged, its files copied into workdir."""
        try:
            entries = sorted((self.folder / stage).iterdir(), key=lambda p: p.stat().st_mtime_ns, reverse=True)
        except OSError:
            return None
        for entry in entries:
            try:
                stored = json.loads((entry / ENTRY).read_text())
                manifest = stored["dependencies"]
                if manifest["cwd"] not in (None, os.getcwd()) or unchanged(manifest["files"], self._hashes):
                    continue
                result = StageResult.model_validate(stored["result"])
                result.cached, result.cached_from = True, CacheOrigin.model_validate(stored["computed"])
                for name in stored["files"]:
                    _copy(entry / name, workdir / name)
                for key, name in stored["artifacts"].items():
                    result.artifacts[key] = str(workdir / name)
                inputs = entry / "inputs.npz"
                return Hit(result, ModelInfo.model_validate(stored["model"]), stored["environment"], manifest,
                           stored["run"], entry / LOG, inputs if inputs.is_file() else None)
            except (OSError, ValueError, KeyError, TypeError):
                continue
        return None

    def store(self, result: StageResult, model: ModelInfo, environment: dict, dependencies: dict, run: str,
              computed: CacheOrigin, workdir: Path, log: Path) -> None:
        if result.status not in CACHEABLE or not dependencies:
            return
        identity = hashlib.sha256(json.dumps(dependencies, sort_keys=True).encode()).hexdigest()[:16]
        entry = self.folder / result.name / identity
        try:
            entry.parent.mkdir(parents=True, exist_ok=True)
            if not (self.folder / "key.json").exists():
                (self.folder / "key.json").write_text(json.dumps(self.facts, indent=1, default=str))
            staging = Path(tempfile.mkdtemp(prefix=".staging-", dir=self.root))
        except OSError:
            return
        try:
            artifacts = {key: str(Path(path).relative_to(workdir)) for key, path in result.artifacts.items()}
            files = [*artifacts.values(), f"reproduce_{result.name}.py"]
            files = [name for name in files if (workdir / name).exists()]
            for name in files:
                (staging / name).parent.mkdir(parents=True, exist_ok=True)
                _copy(workdir / name, staging / name)
            if (workdir / "inputs.npz").is_file():
                shutil.copyfile(workdir / "inputs.npz", staging / "inputs.npz")
            if log.is_file():  # the model's own output may quote a secret
                (staging / LOG).write_text(redact.text(log.read_text(errors="replace")))
            stored = {"result": result.model_dump(mode="json", exclude={"artifacts", "cached", "cached_from"}),
                      "artifacts": artifacts, "files": files, "model": model.model_dump(mode="json"),
                      "environment": environment, "dependencies": dependencies, "run": run,
                      "computed": computed.model_dump()}
            (staging / ENTRY).write_text(json.dumps(stored))
            shutil.rmtree(entry, ignore_errors=True)
            os.replace(staging, entry)  # whole entries appear at once, never half-written
        except (OSError, ValueError):
            shutil.rmtree(staging, ignore_errors=True)


def summary(root: Path) -> dict:
    """What `compatcheck cache info` shows: size, and entries per stage."""
    size, stages, newest = 0, {}, None
    for path in root.rglob("*") if root.is_dir() else ():
        if path.is_file() and not path.is_symlink():
            size += path.stat().st_size
            if path.name == ENTRY:
                stage = path.parent.parent.name
                stages[stage] = stages.get(stage, 0) + 1
                newest = max(newest or 0, path.stat().st_mtime)
    return {"folder": str(root), "bytes": size, "entries": sum(stages.values()), "by_stage": stages,
            "newest": time.strftime("%Y-%m-%d %H:%M:%S", time.localtime(newest)) if newest else None}


def clear(root: Path) -> int:
    """Remove every entry; returns how many there were."""
    count = summary(root)["entries"]
    if root.is_dir():
        for child in root.iterdir():
            if child.is_dir() and not child.is_symlink():
                shutil.rmtree(child, ignore_errors=True)
            else:
                child.unlink(missing_ok=True)
    return count
