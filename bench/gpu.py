"""The GPU rows: the conv net and two example models through the torch stages on CUDA, in float32, float16
and bfloat16, each model and dtype in a process of its own under its own timeout, one line per stage as it goes.

    python bench/gpu.py [--timeout 35] [--budget 360] [models/convnet.py ...]

Needs only torch with CUDA (onnx and onnxruntime where present: the onnxruntime row is the CUDA execution
provider, or "not tried" where the installed onnxruntime has none), so it runs where compatcheck's own
dependencies are not installed. A run killed by a signal prints the signal and the innermost frames that
PYTHONFAULTHANDLER wrote.
"""

import argparse
import importlib.util
import os
import signal
import subprocess
import sys
import tempfile
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
DEFAULT_MODELS = ["models/convnet.py", "models/mha_mask.py", "models/modulelist_loop.py"]
DTYPES = ["float32", "float16", "bfloat16"]
# Against eager on the GPU in the same dtype: a half-precision kernel that fuses differently rounds differently.
TOLERANCE = {"float32": 1e-4, "float16": 1e-2, "bfloat16": 5e-2}


def load(path, dtype):
    import torch

    spec = importlib.util.spec_from_file_location("bench_model", path)
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    torch.manual_seed(0)
    model = module.get_model().eval().to("cuda", getattr(torch, dtype))
    torch.manual_seed(0)
    raw = module.get_inputs()
    raw = raw if isinstance(raw, list) else [raw]
    sets = [((x,), {}) if isinstance(x, torch.Tensor) else ((), x) if isinstance(x, dict) else (x, {}) for x in raw]
    cast = getattr(torch, dtype)
    to = lambda t: t.to("cuda", cast) if t.is_floating_point() else t.to("cuda")  # noqa: E731
    from torch.utils import _pytree as pytree

    return model, [pytree.tree_map_only(torch.Tensor, to, s) for s in sets]


def dynamic_shapes(sets):
    import torch
    from torch.export import Dim
    from torch.utils import _pytree as pytree

    leaves = [pytree.tree_leaves(s) for s in sets]
    specs = [{d: Dim.DYNAMIC for d in range(t.dim()) if any(o[i].shape[d] != t.shape[d] for o in leaves)} or None
             for i, t in enumerate(leaves[0]) if isinstance(t, torch.Tensor)]
    if not any(specs):
        return None
    args, kwargs = pytree.tree_unflatten(specs, pytree.tree_structure(sets[0]))
    return kwargs if sets[0][1] else tuple(args)


def one(path, dtype):
    """Every stage of one model in one dtype, a line each: stage, verdict, max abs error, seconds."""
    import torch
    from torch.utils import _pytree as pytree

    model, sets = load(path, dtype)
    tolerance = TOLERANCE[dtype]

    def error(expected, actual):
        want = [t for t in pytree.tree_leaves(expected) if isinstance(t, torch.Tensor)]
        got = [torch.as_tensor(g).to(w.device) for g, w in zip(pytree.tree_leaves(actual), want)]
        return max(((g.float() - w.float()).abs().max().item() if w.numel() else 0.0) for w, g in zip(want, got))

    def stage(name, build):
        started = time.perf_counter()
        try:
            run = build()
            with torch.no_grad():
                worst = max(error(ref, run(a, k)) for ref, (a, k) in zip(reference, sets))
            torch.cuda.synchronize()
            verdict = "pass" if worst <= tolerance else "mismatch"
            print(f"{name:<13} {verdict:<9} {worst:9.2e} {time.perf_counter() - started:6.1f}s", flush=True)
        except Exception as exc:
            said = (str(exc).strip().splitlines() or [""])[0][:100]
            print(f"{name:<13} fail      {'':9} {time.perf_counter() - started:6.1f}s {type(exc).__name__}: {said}",
                  flush=True)

    with torch.no_grad():
        reference = [model(*a, **k) for a, k in sets]
    folder = Path(tempfile.mkdtemp())
    programs = {}

    def compiled():
        fn = torch.compile(model)
        return lambda a, k: fn(*a, **k)

    def exported():
        programs["export"] = torch.export.export(model, sets[0][0], sets[0][1], dynamic_shapes=dynamic_shapes(sets))
        fn = programs["export"].module()
        return lambda a, k: fn(*a, **k)

    def aot_inductor():
        package = torch._inductor.aoti_compile_and_package(programs["export"], package_path=str(folder / "m.pt2"))
        fn = torch._inductor.aoti_load_package(package)
        return lambda a, k: fn(*a, **k)

    def scripted():
        fn = torch.jit.script(model)
        return lambda a, k: fn(*a, **k)

    def traced():
        with torch.no_grad():
            fn = torch.jit.trace(model, sets[0][0]) if not sets[0][1] else torch.jit.trace(
                model, example_kwarg_inputs=sets[0][1])
        return lambda a, k: fn(*a, **k)

    stage("eager", lambda: lambda a, k: model(*a, **k))
    stage("compile", compiled)
    stage("export", exported)
    if "export" in programs:
        stage("aot_inductor", aot_inductor)
    stage("jit_script", scripted)
    stage("jit_trace", traced)
    try:
        import onnxruntime
    except ImportError:
        onnxruntime = None
    if onnxruntime is None or "CUDAExecutionProvider" not in onnxruntime.get_available_providers():
        print(f"{'onnxruntime':<13} skip      CUDA provider not tried: onnxruntime "
              f"{getattr(onnxruntime, '__version__', 'not installed')} has none", flush=True)
        return

    def ort():
        onnx_file = folder / "m.onnx"
        torch.onnx.export(model, sets[0][0], kwargs=sets[0][1] or None, dynamic_shapes=dynamic_shapes(sets),
                          dynamo=True, verbose=False).save(str(onnx_file))
        session = onnxruntime.InferenceSession(str(onnx_file), providers=["CUDAExecutionProvider"])
        names = [i.name for i in session.get_inputs()]
        return lambda a, k: session.run(None, {n: t.cpu().numpy() for n, t in zip(names, pytree.tree_leaves((a, k)))})

    stage("onnxruntime", ort)


def main():
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("models", nargs="*", default=DEFAULT_MODELS)
    parser.add_argument("--timeout", type=float, default=35.0, help="seconds one model in one dtype may take")
    parser.add_argument("--budget", type=float, default=360.0, help="seconds all runs may take together")
    parser.add_argument("--one", nargs=2, metavar=("MODEL", "DTYPE"), help=argparse.SUPPRESS)
    args = parser.parse_args()
    if args.one:
        return one(*args.one)
    started = time.perf_counter()
    env = {**os.environ, "PYTHONFAULTHANDLER": "1", "PYTHONUNBUFFERED": "1"}
    for model in args.models:
        for dtype in DTYPES:
            left = args.budget - (time.perf_counter() - started)
            if left < 5:
                print(f"{model} {dtype}: not run, the {args.budget:.0f} s budget is spent", flush=True)
                continue
            print(f"{model} {dtype}", flush=True)
            proc = subprocess.Popen([sys.executable, __file__, "--one", model, dtype], cwd=ROOT, env=env,
                                    stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True,
                                    start_new_session=True)
            try:
                out, err = proc.communicate(timeout=min(args.timeout, left))
            except subprocess.TimeoutExpired:
                os.killpg(proc.pid, signal.SIGKILL)
                out, err = proc.communicate()
                print("".join(f"  {line}\n" for line in out.splitlines()), end="")
                print(f"  timed out after {min(args.timeout, left):.0f} s", flush=True)
                continue
            print("".join(f"  {line}\n" for line in out.splitlines()), end="", flush=True)
            if proc.returncode < 0:
                frames = [line.strip() for line in err.splitlines() if line.strip().startswith("File ")][:4]
                print(f"  killed by {signal.Signals(-proc.returncode).name}; innermost frames:", flush=True)
                print("".join(f"    {frame}\n" for frame in frames), end="", flush=True)
            elif proc.returncode:
                print(f"  exit {proc.returncode}: {(err.strip().splitlines() or [''])[-1][:200]}", flush=True)
    print(f"total {time.perf_counter() - started:.0f}s")


if __name__ == "__main__":
    main()
