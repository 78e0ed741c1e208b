"""The floor: the same stages compatcheck runs, once each, in one process, with an allclose and nothing else.

    python bench/floor.py models/convnet.py [--stages compile,jit_trace,...]

--stages leaves the others out, as `compatcheck run --stages` does (eager, the reference, always runs;
aot_inductor needs export, onnxruntime needs onnx_export). The export is saved and loaded back, as a
deployer ships it; AOTInductor compiles that program into a package and loads it. Where openvino is
installed, the model is converted, saved as IR and compiled for the CPU plugin, as the openvino stage does.
"""

import argparse
import copy
import importlib.util
import tempfile
from pathlib import Path

import numpy as np
import onnx
import onnxruntime
import torch
import torch._inductor
from torch.export import Dim
from torch.utils import _pytree as pytree

STAGES = ("compile", "compile_fullgraph", "export", "aot_inductor", "jit_script", "jit_trace", "onnx_export",
          "onnxruntime", "openvino")


def load(path):
    spec = importlib.util.spec_from_file_location("bench_model", path)
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    torch.manual_seed(0)
    model = module.get_model().eval()
    torch.manual_seed(0)
    raw = module.get_inputs()
    raw = raw if isinstance(raw, list) else [raw]
    sets = [((x,), {}) if isinstance(x, torch.Tensor) else ((), x) if isinstance(x, dict) else (x, {}) for x in raw]
    return model, sets


def dynamic_shapes(sets):
    leaves = [pytree.tree_leaves(s) for s in sets]
    specs = [{d: Dim.DYNAMIC for d in range(t.dim()) if any(o[i].shape[d] != t.shape[d] for o in leaves)} or None
             for i, t in enumerate(leaves[0])]
    if not any(specs):
        return None
    args, kwargs = pytree.tree_unflatten(specs, pytree.tree_structure(sets[0]))
    return kwargs if sets[0][1] else tuple(args)


def close(expected, actual):
    want = pytree.tree_leaves(expected)
    got = pytree.tree_leaves(actual) if not isinstance(actual, list) else actual
    return all(np.allclose(np.asarray(g), w.numpy(), atol=1e-5, rtol=1e-4) for w, g in zip(want, got))


def export_and_compile(model, sets, stages, check, verdicts):
    """torch.export (saved and loaded back), then AOTInductor on that program."""
    with tempfile.TemporaryDirectory() as folder:
        try:
            program = torch.export.export(model, sets[0][0], sets[0][1], dynamic_shapes=dynamic_shapes(sets))
            torch.export.save(program, str(Path(folder) / "model.export.pt2"))
            program = torch.export.load(str(Path(folder) / "model.export.pt2"))
        except Exception:
            verdicts.update(export=False, aot_inductor=False)
            return
        loaded = program.module()
        check("export", lambda a, k: loaded(*a, **k))
        if "aot_inductor" in stages:
            try:
                package = torch._inductor.aoti_compile_and_package(program,
                                                                   package_path=str(Path(folder) / "model.aoti.pt2"))
                compiled = torch._inductor.aoti_load_package(package)
                check("aot_inductor", lambda a, k: compiled(*a, **k))
            except Exception:
                verdicts["aot_inductor"] = False


def main(path, stages):
    model, sets = load(path)
    # Each stage gets a copy of the model as built: a failed trace can leave state behind (a module that
    # caches what its forward computed), which a deployer's fresh export would never see.
    copies = {name: copy.deepcopy(model) for name in stages if name != "onnxruntime"}  # it runs the ONNX file
    with torch.no_grad():
        reference = [model(*a, **k) for a, k in sets]
        verdicts = {}

        def check(name, run):
            try:
                # Every input set, as a deployer's check runs them: one that differs does not spare the next.
                verdicts[name] = all([close(ref, run(a, k)) for ref, (a, k) in zip(reference, sets)])
            except Exception:
                verdicts[name] = False

        if "compile" in stages:
            compiled = torch.compile(copies["compile"])
            check("compile", lambda a, k: compiled(*a, **k))
            torch._dynamo.reset()
        if "compile_fullgraph" in stages:
            fullgraph = torch.compile(copies["compile_fullgraph"], fullgraph=True)
            check("compile_fullgraph", lambda a, k: fullgraph(*a, **k))
        if "export" in stages or "aot_inductor" in stages:
            export_and_compile(copies["export" if "export" in copies else "aot_inductor"], sets, stages, check,
                               verdicts)
        if "jit_script" in stages:
            try:
                scripted = torch.jit.script(copies["jit_script"])
                check("jit_script", lambda a, k: scripted(*a, **k))
            except Exception:
                verdicts["jit_script"] = False
        if "jit_trace" in stages:
            try:
                traced = torch.jit.trace(copies["jit_trace"], sets[0][0]) if not sets[0][1] else torch.jit.trace(
                    copies["jit_trace"], example_kwarg_inputs=sets[0][1])
                check("jit_trace", lambda a, k: traced(*a, **k))
            except Exception:
                verdicts["jit_trace"] = False
        if "onnx_export" in stages:
            with tempfile.TemporaryDirectory() as folder:
                onnx_path = Path(folder) / "model.onnx"
                try:
                    program = torch.onnx.export(copies["onnx_export"], sets[0][0], kwargs=sets[0][1] or None,
                                                dynamic_shapes=dynamic_shapes(sets), dynamo=True, verbose=False)
                    program.save(str(onnx_path))
                    onnx.checker.check_model(str(onnx_path), full_check=True)
                    verdicts["onnx_export"] = True
                    if "onnxruntime" in stages:
                        session = onnxruntime.InferenceSession(str(onnx_path), providers=["CPUExecutionProvider"])
                        names = [i.name for i in session.get_inputs()]
                        check("onnxruntime", lambda a, k: session.run(
                            None, {n: t.numpy() for n, t in zip(names, pytree.tree_leaves((a, k)))}))
                except Exception:
                    verdicts.setdefault("onnx_export", False)
                    verdicts["onnxruntime"] = False
        if "openvino" in stages and importlib.util.find_spec("openvino"):
            openvino_stage(copies["openvino"], sets, check, verdicts)
    print(verdicts)


def openvino_stage(model, sets, check, verdicts):
    """convert_model with the batch dynamic, save_model, compile_model(path, "CPU"), at their defaults."""
    import openvino

    with tempfile.TemporaryDirectory() as folder:
        path = str(Path(folder) / "model.openvino.xml")
        try:
            args = sets[0][0]
            converted = openvino.convert_model(model, example_input=args, input=[[-1, *t.shape[1:]] for t in args])
            openvino.save_model(converted, path)
            compiled = openvino.compile_model(path, "CPU")
            check("openvino", lambda a, k: list(compiled([t.numpy() for t in pytree.tree_leaves((a, k))]).to_tuple()))
        except Exception:
            verdicts["openvino"] = False


if __name__ == "__main__":
    parser = argparse.ArgumentParser()
    parser.add_argument("model")
    parser.add_argument("--stages", default=",".join(STAGES), help="comma-separated, from: " + ", ".join(STAGES))
    options = parser.parse_args()
    main(options.model, set(options.stages.split(",")))
