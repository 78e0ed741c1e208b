"""Time the precision pre-flight and the keep-float32 search (compatcheck/diagnose/precision.py) with
--dtype float16 on a deep model: N blocks (Linear and LayerNorm) in an nn.ModuleList, nn.Sequential or
nn.ModuleDict, or as plain attributes,
where block N/2 scales its output past float16's range and the block after it brings it back, so the
two must stay float32 together.

    python bench/precision_search.py [--blocks 500] [--container ModuleList]

Each run is a fresh process, as in a worker: the model is loaded, cast, its eager reference and its
float64 and float32 answers computed, then the pre-flight and search are timed once; the median of
--repeat runs is printed. Target: under 5 s for 500 blocks.
"""

import argparse
import json
import statistics
import subprocess
import sys
import tempfile
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]

MODEL = """
import torch
from torch import nn

BLOCKS, CONTAINER = {blocks}, "{container}"


class Block(nn.Module):
    def __init__(self, scale=1.0):
        super().__init__()
        self.lin = nn.Linear(16, 16)
        self.norm = nn.LayerNorm(16) if scale == 1.0 else nn.Identity()
        self.scale = scale

    def forward(self, x):
        return self.norm(self.lin(x) * self.scale)


class Deep(nn.Module):
    def __init__(self):
        super().__init__()
        blocks = [Block(scale=1e5 if i == BLOCKS // 2 else 1.0) for i in range(BLOCKS)]
        if CONTAINER == "attributes":
            for i, block in enumerate(blocks):
                setattr(self, f"block{{i}}", block)
        elif CONTAINER == "ModuleDict":
            self.blocks = nn.ModuleDict({{f"b{{i}}": block for i, block in enumerate(blocks)}})
        else:
            self.blocks = nn.Sequential(*blocks) if CONTAINER == "Sequential" else nn.ModuleList(blocks)

    def forward(self, x):
        if CONTAINER == "attributes":
            order = [getattr(self, f"block{{i}}") for i in range(BLOCKS)]
        else:
            order = self.blocks.values() if CONTAINER == "ModuleDict" else self.blocks
        for block in order:
            x = block(x)
        return x


def get_model():
    return Deep().eval()


def get_inputs():
    return [torch.randn(4, 16)]
"""

ONE_RUN = """
import json, sys, tempfile, time
from pathlib import Path
from compatcheck.diagnose.precision import precision_findings
from compatcheck.options import RunOptions
from compatcheck.spec import cast, load
from compatcheck.stages.base import StageContext

spec = load(Path(sys.argv[1]), "get_model")
cast(spec, "float16")
ctx = StageContext(spec, RunOptions(dtype="float16"), Path(tempfile.mkdtemp()), {}, {})
ctx.reference
for index in range(len(spec.given_inputs)):  # the float64 and float32 answers, as the comparison computes them
    ctx.fp64(index)
    ctx.float32(index)
start = time.perf_counter()
try:
    found = [f"{f.kind}: {f.op}: {f.message[:90]}" for f in precision_findings(ctx)]
except Exception as exc:
    found = [f"raised {type(exc).__name__}: {str(exc)[:90]}"]
print(json.dumps({"seconds": time.perf_counter() - start, "float32_run": ctx.float32_seconds, "findings": found}))
"""


def main() -> None:
    parser = argparse.ArgumentParser()
    parser.add_argument("--blocks", type=int, default=500)
    parser.add_argument("--container", choices=["ModuleList", "Sequential", "ModuleDict", "attributes"], default="ModuleList")
    parser.add_argument("--repeat", type=int, default=3)
    args = parser.parse_args()
    results = []
    with tempfile.TemporaryDirectory() as folder:
        model = Path(folder) / "deep.py"
        model.write_text(MODEL.format(blocks=args.blocks, container=args.container))
        for _ in range(args.repeat):
            proc = subprocess.run([sys.executable, "-c", ONE_RUN, str(model)], capture_output=True, text=True,
                                  cwd=ROOT, timeout=600)
            if proc.returncode != 0:
                sys.exit(proc.stderr.strip().splitlines()[-1])
            results.append(json.loads(proc.stdout.splitlines()[-1]))
    seconds = [one["seconds"] for one in results]
    print(f"{args.blocks} blocks in {args.container}: pre-flight and search median {statistics.median(seconds):.2f} s "
          f"of {', '.join(f'{s:.2f}' for s in seconds)} (float32 eager run {results[0]['float32_run']:.3f} s)")
    for finding in results[0]["findings"]:
        print(f"  {finding}")


if __name__ == "__main__":
    main()
