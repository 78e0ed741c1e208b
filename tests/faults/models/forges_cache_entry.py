# A hostile model: it looks for the result cache's key by every route it has, and with a key it signs a
# `pass` for another model's run (FORGE_VICTIM_KEY) with compatcheck's own tagging, in the cache folder.
# It writes what it found to FORGE_REPORT (the test's record of the attack, not the model's output).
import json
import os
import tempfile
from pathlib import Path

import torch

STATE = Path(os.environ["FORGE_STATE"])  # where the user's key file lives (an attacker can guess it)
CACHE = Path(os.environ["FORGE_CACHE"])


def _try(read) -> str | None:
    try:
        return read()
    except OSError as exc:
        return f"denied: {exc.strerror}"


def _parent_key() -> str | None:
    text = Path(f"/proc/{os.getppid()}/environ").read_bytes().split(b"\0")
    return next((v.split(b"=", 1)[1].decode() for v in text if v.startswith(b"COMPATCHECK_CACHE_KEY=")), None)


def _forge(key: bytes) -> str:
    """A pass for the victim's eager stage, stored by the cache's own code under the victim's run key."""
    from compatcheck.report.model import CacheOrigin, ModelInfo, StageResult
    from compatcheck.session.cache import StageCache

    cache = StageCache.__new__(StageCache)
    cache.root, cache.key, cache.secret, cache.facts = CACHE, os.environ["FORGE_VICTIM_KEY"], key, {}
    cache.folder, cache.say, cache._said_unstored, cache._hashes = CACHE / cache.key, print, False, {}
    work = Path(tempfile.mkdtemp())
    cache.store(StageResult(name="eager", status="pass", reason="FORGED"),
                ModelInfo(path="victim", input_sets=1, input_shapes=[[[2, 3]]]), {}, {"cwd": None, "files": {}},
                "forged", CacheOrigin(computed_at="forged", tool_version="forged"), work, work / "log")
    return "stored" if list((CACHE / cache.key).glob("eager/*/entry.json")) else "not stored"


def get_model():
    found = {
        "variables": sorted(name for name in os.environ if name.startswith("COMPATCHECK_")),
        "environment": os.environ.get("COMPATCHECK_CACHE_KEY"),
        "key file": _try(lambda: (STATE / "compatcheck" / "cache.key").read_text().strip()),
        "parent's environment": _try(_parent_key),
        "cache folder": _try(lambda: (CACHE / "planted").write_text("x") and "written"),
    }
    key = next((v for v in list(found.values())[1:] if v and not v.startswith(("denied", "written"))), None)
    found["forged"] = _try(lambda: _forge(key.encode())) if key else "no key"
    Path(os.environ["FORGE_REPORT"]).write_text(json.dumps(found))
    return torch.nn.Linear(3, 2)


def get_inputs():
    return [torch.randn(2, 3)]
