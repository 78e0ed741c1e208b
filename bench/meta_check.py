"""Time the device check on the meta device (compatcheck/diagnose/device.py), the eager stage's run of forward
with the model and its inputs moved to `meta`, on each example model.

    python bench/meta_check.py [models/convnet.py ...]

Each model runs in a fresh process, as in a worker: the model is loaded and its eager reference computed,
then the check is timed twice. The first call pays for what the meta run imports (torch's Python meta
kernels pull in its symbolic-shapes module); the second is the run alone. Also printed: whether the check
left torch._dynamo imported, which it defers where nothing in forward asks for it.
"""

import argparse
import json
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]

ONE_MODEL = """
import json, sys, tempfile, time
from pathlib import Path
from compatcheck.diagnose.device import device_traps
from compatcheck.options import RunOptions
from compatcheck.spec import load
from compatcheck.stages.base import StageContext

spec = load(Path(sys.argv[1]), "get_model")
ctx = StageContext(spec, RunOptions(), Path(tempfile.mkdtemp()), {}, {})
ctx.reference
seconds = []
for _ in range(2):
    start = time.perf_counter()
    check = device_traps(ctx)
    seconds.append(time.perf_counter() - start)
print(json.dumps({"seconds": seconds, "findings": len(check.findings), "note": check.note,
                  "dynamo": "torch._dynamo" in sys.modules}))
"""


def main() -> None:
    parser = argparse.ArgumentParser()
    parser.add_argument("models", nargs="*")
    args = parser.parse_args()
    models = [Path(m).resolve() for m in args.models] or sorted(p for p in (ROOT / "models").glob("*.py"))
    print(f"{'model':28} {'first':>7} {'again':>7}  dynamo  findings  note")
    firsts = []
    for model in models:
        proc = subprocess.run([sys.executable, "-c", ONE_MODEL, str(model)], capture_output=True, text=True,
                              cwd=tempfile.gettempdir(), timeout=600)
        if proc.returncode != 0:
            print(f"{model.stem:28} failed: {proc.stderr.strip().splitlines()[-1][:100]}")
            continue
        result = json.loads(proc.stdout.splitlines()[-1])
        first, again = result["seconds"]
        firsts.append(first)
        note = (result["note"] or "")[:60]
        print(f"{model.stem:28} {first:7.2f} {again:7.2f}  {str(result['dynamo']):6}  {result['findings']:8}  {note}")
    if firsts:
        print(f"{'all':28} {sum(firsts):7.2f} s first calls, median {statistics.median(firsts):.2f} s")


if __name__ == "__main__":
    main()
