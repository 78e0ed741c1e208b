"""Time compatcheck against the floor script on the example models and print the ratios.

    python bench/run.py [--runs 3] [--stages eager,jit_trace,...] [models/convnet.py ...]

Measures, per model, the median wall time of: the floor (bench/floor.py); a cold
`compatcheck run` (--no-cache); the same with --jobs 2; and a warm run served from the cache.
Targets: cold/floor <= 1.0, jobs2/floor <= 0.8, warm/cold <= 0.15, --help and --version < 0.5 s.
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
DEFAULT_MODELS = ["models/convnet.py", "models/modulelist_loop.py", "models/data_dependent_if.py"]
STAGES = "eager,compile,compile_fullgraph,jit_script,jit_trace,onnx_export,onnxruntime"


def timed(args, env=None) -> float:
    started = time.perf_counter()
    subprocess.run(args, cwd=ROOT, env=env, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL, check=False)
    return time.perf_counter() - started


def median(args, runs, env=None) -> float:
    return statistics.median(timed(args, env) for _ in range(runs))


def main() -> None:
    parser = argparse.ArgumentParser()
    parser.add_argument("models", nargs="*", default=DEFAULT_MODELS)
    parser.add_argument("--runs", type=int, default=3)
    parser.add_argument("--stages", default=STAGES, help="the stages both sides run (eager always)")
    options = parser.parse_args()
    stages = options.stages
    floor_stages = ",".join(name for name in stages.split(",") if name != "eager")
    python = sys.executable
    cli = [python, "-m", "compatcheck"]
    cache = tempfile.mkdtemp(prefix="compatcheck-bench-cache-")
    env = {**os.environ, "COMPATCHECK_CACHE_DIR": cache}

    startup = {" ".join(args): median(cli + list(args), 5) for args in (["--help"], ["--version"], ["run", "--help"])}
    print("   ".join(f"{args} {seconds:.2f}s" for args, seconds in startup.items()) + "   (target: --help < 0.5 s)")
    print(f"{'model':28} {'floor':>7} {'cold':>7} {'jobs2':>7} {'warm':>7} {'cold/floor':>11} "
          f"{'jobs2/floor':>12} {'warm/cold':>10}")
    for model in options.models:
        floor_args = [python, "bench/floor.py", model, "--stages", floor_stages]
        timed(floor_args)  # warm the on-disk compiler caches for both sides alike
        floor = median(floor_args, options.runs)
        cold = median(cli + ["run", model, "--stages", stages, "--no-cache", "-q"], options.runs)
        jobs2 = median(cli + ["run", model, "--stages", stages, "--no-cache", "-q", "--jobs", "2"], options.runs)
        timed(cli + ["run", model, "--stages", stages, "-q"], env)
        warm = median(cli + ["run", model, "--stages", stages, "-q"], options.runs, env)
        print(f"{Path(model).stem:28} {floor:7.2f} {cold:7.2f} {jobs2:7.2f} {warm:7.2f} {cold / floor:11.2f} "
              f"{jobs2 / floor:12.2f} {warm / cold:10.2f}")


if __name__ == "__main__":
    main()
