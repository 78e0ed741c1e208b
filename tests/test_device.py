"""The device a model is served on: traps a GPU would show, found on the CPU by a run on the meta device;
`--device cuda` refused in one line where there is no GPU, and run where there is one."""

import json
import os
import re
import subprocess
import sys
import textwrap

import pytest
import torch

from tests.conftest import MODELS, ROOT, run_cli, run_json

DEVICE_MODELS = ROOT / "tests" / "models"
TRAPS = DEVICE_MODELS / "device_traps.py"
GPU = torch.cuda.is_available()


def line_of(text: str, source: str | None = None) -> int:
    """The one line of `source` (default the traps model's) that is `text`, stripped."""
    lines = [n for n, line in enumerate((source or TRAPS.read_text()).splitlines(), 1) if line.strip() == text]
    assert len(lines) == 1, f"{text!r} is on lines {lines}"
    return lines[0]


def device_findings(report: dict) -> dict[int, dict]:
    return {f["line"]: f for f in report["findings"] if f["kind"] == "device"}


def test_each_device_trap_is_a_finding_at_its_line_with_the_rewrite_that_fits(tmp_path):
    proc, report = run_json(tmp_path, "run", str(TRAPS), "--stages", "eager")
    eager = report["stages"][0]
    assert eager["status"] == "pass" and eager["reason"] is None, proc.stdout
    found = device_findings(report)
    expected = {
        "pad = torch.zeros(x.shape[1])": ("torch.zeros", "pad = x.new_zeros(x.shape[1])"),
        "mask = torch.arange(x.shape[1]) < 2": ("torch.arange", "mask = torch.arange(x.shape[1], device=x.device) < 2"),
        "return h.cpu() + 1": (".cpu()", "return h + 1"),
        "if torch.cuda.is_available():": ("torch.cuda.is_available()", "if x.is_cuda:"),
        "self.scale = torch.tensor([1.0, 2.0, 3.0, 4.0])":
            ("self.scale", 'self.register_buffer("scale", torch.tensor([1.0, 2.0, 3.0, 4.0]))'),
    }
    assert sorted(found) == sorted(line_of(code) for code in expected), found
    for code, (op, rewrite) in expected.items():
        finding = found[line_of(code)]
        assert (finding["stage"], finding["file"], finding["code"], finding["op"], finding["rewrite"]) == \
            ("eager", "device_traps.py", code, op, rewrite)
    mixed = found[line_of("pad = torch.zeros(x.shape[1])")]["message"]
    assert "on a GPU .add() at device_traps.py:17 mixes it with the input's CUDA tensors" in mixed
    assert "bake in the branch" in found[line_of("if torch.cuda.is_available():")]["message"]


def test_a_model_on_the_inputs_device_has_no_device_finding_and_its_trace_and_program_are_notes(tmp_path):
    # The legacy exporter: what is asserted is the onnxruntime backend's line, which the dynamo one makes slower.
    proc, report = run_json(tmp_path, "run", f"{TRAPS}:correct", "--stages", "eager,export,jit_trace,onnxruntime",
                            "--onnx-exporter", "legacy")
    stages = {stage["name"]: stage for stage in report["stages"]}
    assert {name: stage["status"] for name, stage in stages.items()} == dict.fromkeys(stages, "pass"), proc.stdout
    assert device_findings(report) == {} and stages["eager"]["reason"] is None
    # device=x.device leaves a cpu constant in what was traced or exported on the CPU: a note, not a finding
    assert stages["jit_trace"]["reason"] == (
        "the trace holds the device cpu as a constant (aten::zeros at device_traps.py:30 and 2 more): it runs on "
        "the CPU only; trace on the device you deploy to")
    assert stages["export"]["reason"].startswith(
        "the exported program makes tensors on the cpu (aten.zeros at device_traps.py:30 and 1 more): it runs on "
        "the CPU only; export on the device you deploy to, or move it: torch.export.passes.move_to_device_pass")
    assert re.fullmatch(r"onnxruntime \S+: \d+ nodes on CPUExecutionProvider", stages["onnxruntime"]["backend"])


@pytest.mark.slow
@pytest.mark.parametrize("stem", ["data_dependent_if"])
def test_where_the_meta_run_stops_short_the_rest_is_a_note_not_a_finding(shared_runs, stem):
    report = shared_runs.get(MODELS / f"{stem}.py").report
    eager = report["stages"][0]
    assert eager["status"] == "pass" and device_findings(report) == {}
    assert eager["reason"] == ("device traps not checked on meta past data_dependent_if.py:31 (Tensor.item() "
                               "cannot be called on meta tensors)")


# A model that asks torch._dynamo a question halfway through forward, as libraries do, then makes a CPU tensor,
# then calls a library that asks the data a question, as transformers' causal mask asks padding_mask.all().
MASKING = textwrap.dedent("""
    import torch


    def causal_mask(padding):
        if padding.all():
            return None
        return padding[:, None, :] & padding[:, :, None]
""")
ASKS = textwrap.dedent("""
    import torch
    from transformers.masking import causal_mask


    class Model(torch.nn.Module):
        def __init__(self):
            super().__init__()
            self.norm = torch.nn.BatchNorm1d(4)

        def forward(self, x, padding):
            h = self.norm(x)
            if not torch._dynamo.is_compiling():
                h = h + torch.ones(x.shape[1])
            mask = causal_mask(padding)
            return h if mask is None else h[:, None, :] * mask
""")


# The meta run in fresh interpreters, side by side. Batch norm's meta kernel calls refs that torch marks, on
# first call, as never to be traced by dynamo, which imports torch._dynamo (1-2 s). The run defers that:
# torch._dynamo is still not imported after it, and the refs are marked for real on their next call, which
# imports it. The other interpreter checks the model above.
META_RUNS = """
import importlib.util, json, sys, torch, compatcheck
case, folder = sys.argv[1:]
if case == "plain":
    model, inputs = torch.nn.Sequential(torch.nn.Linear(4, 4), torch.nn.BatchNorm1d(4)).eval(), [torch.randn(2, 4)]
else:
    sys.path.insert(0, folder + "/site-packages")
    spec = importlib.util.spec_from_file_location("asks", folder + "/model.py")
    module = sys.modules["asks"] = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    model, inputs = module.Model().eval(), [(torch.randn(2, 4), torch.ones(2, 4, dtype=torch.bool))]
report = compatcheck.check(model, inputs, stages=["eager"], isolate=False, cache=False)
seen = {"devices": [[f.line, f.op] for f in report.findings if f.kind == "device"],
        "reason": report.stages[0].reason, "dynamo after the check": "torch._dynamo" in sys.modules}
if case == "plain":
    torch.nn.BatchNorm1d(4).eval().to("meta")(torch.randn(2, 4, device="meta"))
    seen["dynamo after a ref's next call"] = "torch._dynamo" in sys.modules
print(json.dumps(seen))
"""
# Whether this torch's refs import torch._dynamo at all: newer ones have a fast path that does not.
REF_IMPORTS_DYNAMO = """
import sys, torch
torch.nn.BatchNorm1d(4).eval().to("meta")(torch.randn(2, 4, device="meta"))
print("torch._dynamo" in sys.modules)
"""


@pytest.fixture(scope="module")
def meta_runs(tmp_path_factory) -> dict[str, dict]:
    folder = tmp_path_factory.mktemp("meta_runs")
    (folder / "site-packages" / "transformers").mkdir(parents=True)
    (folder / "site-packages" / "transformers" / "__init__.py").write_text("")
    (folder / "site-packages" / "transformers" / "masking.py").write_text(MASKING)
    (folder / "model.py").write_text(ASKS)
    runs = {case: subprocess.Popen([sys.executable, "-c", META_RUNS, case, str(folder)],
                                   cwd=ROOT, text=True, stdout=subprocess.PIPE, stderr=subprocess.PIPE)
            for case in ("plain", "asks")}
    seen = {}
    for case, proc in runs.items():
        out, err = proc.communicate(timeout=300)
        assert proc.returncode == 0, err[-3000:]
        seen[case] = json.loads(out.splitlines()[-1])
    return seen


def test_where_a_library_stops_the_meta_run_the_reason_names_its_line_after_the_users(meta_runs):
    assert meta_runs["asks"]["reason"] == (
        f"device traps not checked on meta past model.py:{line_of('mask = causal_mask(padding)', ASKS)} "
        f"(transformers/masking.py:{line_of('if padding.all():', MASKING)}: Tensor.item() cannot be called on meta "
        "tensors)")


def test_the_meta_run_leaves_torch_dynamo_unimported_unless_forward_asks_for_it(meta_runs):
    if not meta_runs["plain"]["dynamo after a ref's next call"]:
        probe = subprocess.run([sys.executable, "-c", REF_IMPORTS_DYNAMO], capture_output=True, text=True, timeout=300)
        if probe.stdout.strip() != "True":
            pytest.skip(f"torch {torch.__version__} calls its refs without importing torch._dynamo: nothing to defer")
    assert meta_runs["plain"] == {"devices": [], "reason": None, "dynamo after the check": False,
                                  "dynamo after a ref's next call": True}
    # a question to torch._dynamo in forward imports it there, and the run goes on to the trap after it
    assert meta_runs["asks"]["devices"] == [[line_of("h = h + torch.ones(x.shape[1])", ASKS), "torch.ones"]]
    assert meta_runs["asks"]["dynamo after the check"]


@pytest.mark.skipif(GPU, reason="this machine has a GPU: --device cuda runs")
def test_device_cuda_without_a_gpu_is_one_line_and_exit_2():
    proc = run_cli("run", str(MODELS / "convnet.py"), "--device", "cuda", timeout=300)
    assert proc.returncode == 2 and proc.stdout == "", proc.stdout
    assert proc.stderr.splitlines() == [
        f"error: device cuda needs a GPU: torch {torch.__version__} is a build without CUDA; run on a machine with "
        "one, or with device cpu" if torch.version.cuda is None else
        f"error: device cuda needs a GPU: torch {torch.__version__} (CUDA {torch.version.cuda}) sees no GPU; run on "
        "a machine with one, or with device cpu"]


# The onnxruntime stage where onnxruntime cannot be imported: `sys.modules[name] = None` is how Python
# marks a module absent, so every `import onnxruntime` in that process raises ModuleNotFoundError. The legacy
# exporter makes the ONNX file several times faster than the dynamo one; the file is not what is tested.
WITHOUT_ONNXRUNTIME = """
import sys
sys.modules["onnxruntime"] = None
import json, torch, compatcheck
model = torch.nn.Sequential(torch.nn.Linear(4, 2))
report = compatcheck.check(model, [torch.randn(2, 4), torch.randn(3, 4)], stages=["onnxruntime"], isolate=False,
                           device=sys.argv[1], onnx_exporter="legacy")
print(json.dumps({stage.name: [stage.status.value, stage.reason] for stage in report.stages}))
"""


def test_without_onnxruntime_the_stage_skips_naming_the_install(tmp_path):
    proc = subprocess.run([sys.executable, "-c", WITHOUT_ONNXRUNTIME, "cpu"], capture_output=True, text=True,
                          cwd=tmp_path, env={**os.environ, "PYTHONPATH": str(ROOT)}, timeout=600)
    assert proc.returncode == 0, proc.stderr[-3000:]
    stages = json.loads(proc.stdout.splitlines()[-1])
    assert stages["onnx_export"][0] == "pass"
    assert stages["onnxruntime"] == ["skip", "onnxruntime is not installed: pip install 'compatcheck[cpu]', or "
                                             "pip install 'compatcheck[gpu]' for the CUDA execution provider"]


@pytest.mark.skipif(not GPU, reason="needs a GPU and a CUDA build of torch")
def test_on_the_gpu_the_torch_stages_run_there_and_a_trap_fails_eager_at_its_line(tmp_path):
    proc, report = run_json(tmp_path, "run", str(MODELS / "convnet.py"), "--device", "cuda", "--stages",
                            "eager,compile,export,jit_script,jit_trace,onnxruntime")
    stages = {stage["name"]: stage for stage in report["stages"]}
    assert report["options"]["device"] == "cuda" and report["environment"]["device"] != "cpu"
    for name in ("eager", "compile", "export", "jit_script", "jit_trace"):
        assert stages[name]["status"] == "pass", (name, stages[name]["reason"])
    ort = stages["onnxruntime"]
    assert ort["status"] == "pass" and "CUDAExecutionProvider" in ort["backend"] or ort["status"] == "skip" and \
        "CUDA provider was not tried" in ort["reason"], ort
    proc, report = run_json(tmp_path, "run", str(TRAPS), "--device", "cuda", "--stages", "eager")
    assert report["stages"][0]["status"] == "fail"
    assert line_of("pad = torch.zeros(x.shape[1])") in device_findings(report)
