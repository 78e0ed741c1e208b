"""No model is lost at load: a torch.ao quantized model's state (ScriptObjects, a torch.dtype, tuples) is
copied and checked like any other, and an exception in compatcheck's own code is its internal error
(exit 3, the traceback kept, the other stages' verdicts kept), never the model's fault."""

from __future__ import annotations

import copy
import importlib.util
from concurrent.futures import ThreadPoolExecutor

import pytest
import torch

from compatcheck import snapshot
from tests.conftest import ROOT, run_cli, run_json, verdicts

MODELS = ROOT / "tests" / "models"
QUANTIZED = {"quantized_linear": "eager,export,jit_trace", "quantized_lstm": "eager,onnx_export"}


def _model(stem: str):
    spec = importlib.util.spec_from_file_location(stem, MODELS / f"{stem}.py")
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module.get_model()


@pytest.fixture(scope="module")
def quantized(tmp_path_factory) -> dict[str, tuple]:
    def run(stem: str):
        return stem, run_json(tmp_path_factory.mktemp(stem), "run", str(MODELS / f"{stem}.py"), "--stages",
                              QUANTIZED[stem], "--no-cache")

    with ThreadPoolExecutor(2) as pool:
        return dict(pool.map(run, QUANTIZED))


def test_a_quantized_models_state_is_copied_and_a_change_to_it_is_seen():
    model = _model("quantized_lstm")
    first = {name: snapshot.take(value) for name, value in model.state_dict().items()}
    kinds = {type(leaf) for value in first.values() for leaf in torch.utils._pytree.tree_leaves(value)}
    assert {torch.Tensor, torch.dtype, str} <= kinds  # the packed weights by what they pickle to
    assert snapshot.differs(copy.deepcopy(model).state_dict(), first) is None
    changed = copy.deepcopy(model)
    weight, bias = changed.fc._packed_params._weight_bias()
    changed.fc.set_weight_bias(torch.quantize_per_tensor(weight.dequantize() * 2, 0.1, 0, torch.qint8), bias)
    assert snapshot.differs(changed.state_dict(), first) == "fc._packed_params._packed_params differs"


@pytest.mark.parametrize("stem, expected", [
    ("quantized_linear", {"eager": "pass", "export": "fail", "jit_trace": "pass"}),
    ("quantized_lstm", {"eager": "pass", "onnx_export": "fail"}),
])
def test_a_dynamically_quantized_model_gets_a_verdict_on_every_stage(quantized, stem, expected):
    proc, report = quantized[stem]
    assert proc.returncode == 1, proc.stderr
    assert verdicts(report) == expected
    assert not any("copy" in (stage["reason"] or "") for stage in report["stages"])  # every copy proven equal
    failed = [stage for stage in report["stages"] if stage["status"] == "fail"]
    assert all(stage["findings"] for stage in failed)


@pytest.mark.parametrize("stem, stage, modules, checked", [
    ("quantized_linear", "export", "fc (torch.ao.nn.quantized.dynamic.Linear)", "exported with torch.export"),
    ("quantized_lstm", "onnx_export", "lstm (torch.ao.nn.quantized.dynamic.LSTM), fc (", "onnxruntime ran it"),
])
def test_a_quantized_modules_finding_names_it_and_the_route_whose_first_step_was_run(quantized, stem, stage,
                                                                                    modules, checked):
    _, report = quantized[stem]
    first = next(s for s in report["stages"] if s["name"] == stage)["findings"][0]
    assert first["kind"] == "quantized-module" and modules in first["message"], first
    assert "quantize" in first["message"].split("The route that exports a quantized model:")[1]
    assert checked in first["checked_by"] and first["line"]


def _planted(tmp_path, code: str) -> dict:
    """The environment of a run whose workers have compatcheck's own code broken by `code`."""
    folder = tmp_path / "planted"
    folder.mkdir()
    (folder / "sitecustomize.py").write_text(
        "import sys\nif any('worker-request-' in arg for arg in sys.argv):\n" + code)
    return {"PYTHONPATH": f"{folder}:{ROOT}", "TMPDIR": str(tmp_path)}


def test_an_internal_error_in_a_stage_is_compatchecks_and_the_other_stages_keep_their_verdicts(tmp_path):
    # The second stage's pristine copy raises, as a copy that cannot handle some state did.
    env = _planted(tmp_path, "    import compatcheck.spec as spec\n    copy, made = spec.Pristine.copy, []\n"
                   "    def failing(self, *args, **kwargs):\n"
                   "        made.append(sys._getframe(1).f_code.co_name)\n"
                   "        if made.count('fresh_model') == 2:\n            raise TypeError('planted')\n"
                   "        return copy(self, *args, **kwargs)\n    spec.Pristine.copy = failing\n")
    out = tmp_path / "report.json"
    proc = run_cli("run", str(MODELS / "quantized_linear.py"), "--stages", "eager,jit_script,jit_trace",
                   "--no-cache", "--quiet", "--json", str(out), env=env)
    assert proc.returncode == 3, proc.stderr
    report = __import__("json").loads(out.read_text())
    assert verdicts(report) == {"eager": "pass", "jit_script": "internal-error", "jit_trace": "pass"}
    script = report["stages"][1]
    assert script["reason"] == "internal error of compatcheck: TypeError: planted"
    assert "raise TypeError('planted')" in script["error"]  # the traceback
    assert proc.stderr.strip().startswith("error: jit_script: internal error of compatcheck: TypeError: planted")
    assert len(proc.stderr.strip().splitlines()) == 1
    routes = {route["name"]: route["status"] for route in report["routes"]}
    assert routes["TorchScript (script)"] == "not-checked" and routes["TorchScript (trace)"] == "works"


def test_an_internal_error_while_loading_is_compatchecks_not_the_model_files(tmp_path):
    env = _planted(tmp_path, "    import compatcheck.snapshot as snapshot\n"
                   "    def failing(value):\n        raise AttributeError('planted')\n    snapshot.take = failing\n")
    proc = run_cli("run", str(MODELS / "quantized_linear.py"), "--stages", "eager", "--no-cache", env=env)
    assert proc.returncode == 3
    line, = proc.stderr.strip().splitlines()
    assert line.startswith("error: internal error of compatcheck (a bug of compatcheck, not of the model): "
                           "AttributeError: planted; the traceback is in ")
    assert "while loading the model" not in line
    kept = line.rsplit(" ", 1)[1]
    assert "raise AttributeError('planted')" in open(kept).read()
