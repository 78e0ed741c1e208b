"""Time compatcheck against the floor script on the example models and print the ratios.

    python bench/run.py [--runs 3] [models/convnet.py ...]

Per model, paired runs (each side in turn, every run with a fresh inductor cache, as on a new machine),
medians of wall and CPU seconds (user + system, the process and its children) of:
- the floor (bench/floor.py): the stages once each in one process with an allclose, nothing else; with
  export, AOTInductor and, where installed, OpenVINO ("floor"), and without them, as the floor was before they were added ("floor-6");
- a cold `compatcheck run --skip triton --no-cache` with the default options (the sweep, the meta run, the
  batch checks, the default workers: one on fewer than 8 cores);
- the same with --jobs 2;
- a warm run, served from the result cache.
Targets: cold/floor <= 0.9 (wall) and <= 1.05 (CPU), warm/cold <= 0.05, --help and --version < 0.5 s.
"""

import argparse
import os
import resource
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
DEFAULT_MODELS = ["models/convnet.py", "models/modulelist_loop.py", "models/data_dependent_if.py"]
FLOOR_STAGES = "compile,compile_fullgraph,export,aot_inductor,jit_script,jit_trace,onnx_export,onnxruntime,openvino"
OLD_FLOOR_STAGES = "compile,compile_fullgraph,jit_script,jit_trace,onnx_export,onnxruntime"


def timed(args, env=None) -> tuple[float, float]:
    """(wall, CPU) seconds of one run of `args`, with a fresh inductor cache unless `env` names one."""
    before = resource.getrusage(resource.RUSAGE_CHILDREN)
    started = time.perf_counter()
    with tempfile.TemporaryDirectory(prefix="bench-inductor-") as inductor:
        subprocess.run(args, cwd=ROOT, env={"TORCHINDUCTOR_CACHE_DIR": inductor, **(env or os.environ)},
                       stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL, check=False)
    wall = time.perf_counter() - started
    after = resource.getrusage(resource.RUSAGE_CHILDREN)
    return wall, (after.ru_utime - before.ru_utime) + (after.ru_stime - before.ru_stime)


def paired(commands: dict, runs: int) -> dict:
    """Median (wall, CPU) per command, the commands run in turn `runs` times."""
    seen = {name: [] for name in commands}
    for _ in range(runs):
        for name, (args, env) in commands.items():
            seen[name].append(timed(args, env))
    return {name: (statistics.median(w for w, _ in one), statistics.median(c for _, c in one))
            for name, one in seen.items()}


def main() -> None:
    parser = argparse.ArgumentParser()
    parser.add_argument("models", nargs="*", default=DEFAULT_MODELS)
    parser.add_argument("--runs", type=int, default=3)
    options = parser.parse_args()
    python = sys.executable
    cli = [python, "-m", "compatcheck"]
    cache = tempfile.mkdtemp(prefix="compatcheck-bench-cache-")
    # The result cache's key holds TORCHINDUCTOR_* variables: the warm runs keep one inductor cache.
    warm_env = {**os.environ, "COMPATCHECK_CACHE_DIR": cache, "TORCHINDUCTOR_CACHE_DIR": tempfile.mkdtemp()}

    startup = {" ".join(args): statistics.median(timed(cli + list(args))[0] for _ in range(5))
               for args in (["--help"], ["--version"], ["run", "--help"])}
    print("   ".join(f"{args} {seconds:.2f}s" for args, seconds in startup.items()) + "   (target: --help < 0.5 s)")
    print(f"{'model':20} {'floor':>13} {'floor-6':>13} {'cold':>13} {'jobs2':>13} {'warm':>6} "
          f"{'cold/floor':>16} {'warm/cold':>9}")
    print(f"{'':20} {'wall / CPU':>13} {'wall / CPU':>13} {'wall / CPU':>13} {'wall / CPU':>13} {'wall':>6} "
          f"{'wall / CPU':>16}")
    for model in options.models:
        run = cli + ["run", model, "--skip", "triton", "--no-cache", "-q"]
        found = paired({"floor": ([python, "bench/floor.py", model, "--stages", FLOOR_STAGES], None),
                        "floor-6": ([python, "bench/floor.py", model, "--stages", OLD_FLOOR_STAGES], None),
                        "cold": (run, None), "jobs2": (run + ["--jobs", "2"], None)}, options.runs)
        timed(cli + ["run", model, "--skip", "triton", "-q"], warm_env)
        warm = statistics.median(timed(cli + ["run", model, "--skip", "triton", "-q"], warm_env)[0]
                                 for _ in range(options.runs))
        cells = " ".join(f"{found[name][0]:6.1f}/{found[name][1]:6.1f}" for name in ("floor", "floor-6", "cold", "jobs2"))
        (floor_wall, floor_cpu), (cold_wall, cold_cpu) = found["floor"], found["cold"]
        print(f"{Path(model).stem:20} {cells} {warm:6.2f} {cold_wall / floor_wall:7.2f} / {cold_cpu / floor_cpu:5.2f} "
              f"{warm / cold_wall:9.3f}")


if __name__ == "__main__":
    main()
