"""Time what validating a cache hit costs: the run key (installed distributions, environment) and,
per stage, reading and authenticating the entry, re-hashing every file in its dependency manifest and
copying its files out with their hashes checked.

    python bench/cache_lookup.py [--stages eager,jit_script] [models/convnet.py ...]

Fills a private cache with one cold run per model (in a subprocess, as a user would), then times
the lookup of every stage in this process. Target: under 0.1 s per run for every example model.
"""

import argparse
import os
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))

from compatcheck import ladder  # noqa: E402
from compatcheck.session.cache import StageCache  # noqa: E402
from compatcheck.options import RunOptions  # noqa: E402


def main() -> None:
    parser = argparse.ArgumentParser()
    parser.add_argument("models", nargs="*")
    parser.add_argument("--stages", default="eager,jit_script,jit_trace")
    parser.add_argument("--repeat", type=int, default=5)
    args = parser.parse_args()
    models = [Path(m).resolve() for m in args.models] or sorted((ROOT / "models").glob("*.py"))
    with tempfile.TemporaryDirectory() as cache_dir, tempfile.TemporaryDirectory() as state_dir:
        os.environ["COMPATCHECK_CACHE_DIR"] = cache_dir
        os.environ["XDG_STATE_HOME"] = state_dir  # the key the entries are tagged with: the bench's own
        options = RunOptions(stages=ladder.select(args.stages.split(","), None))
        worst = 0.0
        for model in models:
            subprocess.run([sys.executable, "-m", "compatcheck", "run", str(model), "--stages", args.stages,
                            "--quiet"], cwd=ROOT, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
            times = []
            for _ in range(args.repeat):
                with tempfile.TemporaryDirectory() as workdir:
                    started = time.perf_counter()
                    cache = StageCache(Path(cache_dir), model, "get_model", options)
                    hits = [cache.load(name, Path(workdir)) for name in options.stages]
                    times.append(time.perf_counter() - started)
            seconds = statistics.median(times)
            worst = max(worst, seconds)
            found = sum(hit is not None for hit in hits)
            print(f"{model.name:28} {found}/{len(hits)} stages hit  {seconds * 1000:6.1f} ms")
        print(f"slowest: {worst * 1000:.1f} ms (target < 100 ms)")


if __name__ == "__main__":
    main()
