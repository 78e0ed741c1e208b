"""What one more input set costs a run: an eager-only `compatcheck run --no-cache` of a small MLP with FEW and
then MANY input sets, each in turn, several times; the difference of the medians over the difference of the
counts is compatcheck's own cost per input set (the MLP's forward is microseconds).

    python bench/input_sets.py [--runs 3]

Target: at most 2.5 ms of CPU per input set on a 2-core machine (every stage runs every input set, eager
three times: twice as the reference, once in float64).
"""

import argparse
import statistics
import sys
import tempfile
from pathlib import Path

from run import timed  # bench/run.py: (wall, CPU) of a command

FEW, MANY = 200, 1200
MODEL = """
import torch

def get_model():
    return torch.nn.Sequential(torch.nn.Linear(4, 8), torch.nn.ReLU(), torch.nn.Linear(8, 2))

def get_inputs():
    return [(torch.randn(1 + i % 3, 4),) for i in range({count})]
"""


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--runs", type=int, default=3)
    runs = parser.parse_args().runs
    with tempfile.TemporaryDirectory(prefix="bench-input-sets-") as folder:
        models = {count: Path(folder) / f"mlp_{count}.py" for count in (FEW, MANY)}
        for count, model in models.items():
            model.write_text(MODEL.format(count=count))
        cpu = {FEW: [], MANY: []}
        for _ in range(runs):
            for count, model in models.items():
                command = [sys.executable, "-m", "compatcheck", "run", str(model), "--stages", "eager", "--no-cache",
                           "--quiet", "--json", str(Path(folder) / "report.json")]
                cpu[count].append(timed(command)[1])
    per_set = (statistics.median(cpu[MANY]) - statistics.median(cpu[FEW])) / (MANY - FEW)
    print(f"CPU s, median of {runs}: {FEW} input sets {statistics.median(cpu[FEW]):.2f}, "
          f"{MANY} input sets {statistics.median(cpu[MANY]):.2f}")
    print(f"per input set: {per_set * 1000:.2f} ms of CPU (target <= 2.5 ms)")


if __name__ == "__main__":
    main()
