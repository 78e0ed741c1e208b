"""What telling the user's files from the rest costs a worker: every module loaded once torch, torch._dynamo,
torch.export and the ONNX exporter are imported, asked of a fresh UserCode (the state check, the clock check
and the cache manifest each ask it of every loaded module, the reproducers too), in a process of its own per
round; the median of the rounds.

    python bench/user_code.py [--runs 5]

Target: at most 50 ms per worker on a 2-core machine (it was 150 ms when each file's path was resolved in
full and its folders compared as Path objects).
"""

import argparse
import json
import statistics
import subprocess
import sys
from pathlib import Path

ROUND = """
import json, sys, time
import torch, torch._dynamo, torch.export, torch.onnx, onnx
from compatcheck.frames import UserCode

user = UserCode({model!r})
files = [getattr(module, "__file__", None) for module in list(sys.modules.values())]
started = time.perf_counter()
owned = sum(user.owns(file) for file in files)
print(json.dumps({{"seconds": time.perf_counter() - started, "modules": len(files), "owned": owned}}))
"""


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--runs", type=int, default=5)
    runs = parser.parse_args().runs
    model = str(Path(__file__).resolve().parents[1] / "models" / "convnet.py")
    rounds = [json.loads(subprocess.run([sys.executable, "-c", ROUND.format(model=model)], capture_output=True,
                                        text=True, check=True).stdout.splitlines()[-1]) for _ in range(runs)]
    seconds = statistics.median(r["seconds"] for r in rounds)
    print(f"{rounds[0]['modules']} loaded modules, {rounds[0]['owned']} the user's: "
          f"{seconds * 1000:.0f} ms, median of {runs} (target <= 50 ms)")


if __name__ == "__main__":
    main()
