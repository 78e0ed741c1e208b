"""The OpenVINO route with the real runtime: convert_model, save_model and compile_model("CPU") at their
defaults are the verdict; what they lower on their own is caught and the float32 recipe proven; an op the
frontend cannot convert is named at its line; torch.compile's OpenVINO backend failing in torch's own
guard code is the environment's fault, not the model's."""

import pytest

from tests.conftest import REAL_PYTHON, ROOT, run_cli, run_json, verdicts

openvino = pytest.importorskip("openvino", reason="the openvino extra is not installed")

MODELS = ROOT / "tests" / "models"
CONVNET = ROOT / "models" / "convnet.py"


def _stage(report: dict, name: str = "openvino") -> dict:
    return next(stage for stage in report["stages"] if stage["name"] == name)


def _findings(report: dict, kind: str) -> list[dict]:
    return [f for f in report["findings"] if f["stage"] == "openvino" and f["kind"] == kind]


def _bf16_here() -> bool:
    return "BF16" in openvino.Core().get_property("CPU", "OPTIMIZATION_CAPABILITIES")


def test_a_model_exact_in_every_precision_passes_at_every_size_with_its_dims_dynamic(tmp_path):
    _, report = run_json(tmp_path, "run", str(MODELS / "openvino_exact.py"), "--stages", "openvino")
    stage = _stage(report)
    assert stage["status"] == "pass", stage
    assert "input=[[-1, -1]]" in stage["call"]  # batch and length, as the input sets vary them
    assert {swept["label"] for swept in stage["swept"]} >= {"batch 1", "ids.shape[1] = 13"}
    assert all(swept["ok"] for swept in stage["swept"])
    assert stage["backend"].startswith(f"OpenVINO {openvino.__version__.split('-')[0]} CPU plugin, inference "
                                       f"precision {'bf16' if _bf16_here() else 'f32'}")


def test_a_model_called_with_keywords_is_converted_by_name_with_each_tensors_dims(tmp_path):
    _, report = run_json(tmp_path, "run", str(MODELS / "mixed_call.py"), "--stages", "openvino")
    stage = _stage(report)
    assert stage["status"] == "pass", stage
    assert "example_input=keywords, input={'x': [-1, 3], 'y': [-1, 3], 'mask': [-1, 3]}" in stage["call"]


def test_an_op_the_frontend_cannot_convert_is_named_at_the_users_line(tmp_path):
    _, report = run_json(tmp_path, "run", str(MODELS / "openvino_histogram.py"), "--stages", "openvino")
    assert _stage(report)["status"] == "fail"
    [finding] = _findings(report, "unconvertible-op")
    assert finding["op"] == "aten::histc"
    assert (finding["file"], finding["line"]) == ("openvino_histogram.py", 14)
    assert "torch.histc" in finding["code"]
    assert _stage(report)["reason"].startswith("ConversionFailed: openvino.convert_model failed at "
                                               "openvino_histogram.py:14")


def test_a_trace_the_frontend_cannot_make_is_the_tracers_own_error(tmp_path):
    """A dataclass among the outputs: the frontend's torch.jit.trace refuses it, and says so only in the cause."""
    _, report = run_json(tmp_path, "run", str(MODELS / "keyword_dict_output.py"), "--stages", "openvino")
    stage = _stage(report)
    assert stage["reason"].startswith("ConversionFailed: openvino.convert_model's trace of the model failed: ")
    [finding] = [f for f in report["findings"] if f["stage"] == "openvino"]
    assert finding["kind"] == "trace-error" and "got value of type Hidden" in finding["message"]


def test_the_precision_the_defaults_chose_is_caught_and_float32_is_proven(tmp_path):
    """save_model's float16 weights differ on any processor; the CPU plugin's bfloat16 only on one with bf16
    instructions: there both are named and only float32 throughout passes; elsewhere the plugin reports f32,
    no bfloat16 finding is made, and keeping the weights in float32 is enough."""
    _, report = run_json(tmp_path, "run", str(CONVNET), "--stages", "openvino")
    assert _stage(report)["status"] == "mismatch"
    found = {f["message"].split(" (")[0]: f for f in _findings(report, "reduced-precision")}
    weights = found.pop("openvino.save_model stored the weights in float16")
    assert "compress_to_fp16=False" in weights["rewrite"]
    [proven] = _findings(report, "passes-with")
    assert weights["checked_by"] == f"with {proven['op']}, input sets 1, 2 answer as eager does"
    if _bf16_here():
        [plugin] = found.values()
        assert plugin["message"].endswith("(its default on this processor: OPTIMIZATION_CAPABILITIES lists BF16)")
        assert 'config={"INFERENCE_PRECISION_HINT": "f32"}' in plugin["rewrite"]
        assert proven["op"].startswith('compress_to_fp16=False and config={"INFERENCE_PRECISION_HINT": "f32"}')
    else:
        assert found == {} and "inference precision f32" in _stage(report)["backend"]
        assert proven["op"].startswith("compress_to_fp16=False (")
    [route] = [r for r in report["routes"] if r["name"] == "OpenVINO"]
    assert f"works with {proven['op']}" in route["summary"]


def test_a_backend_torch_does_not_have_is_a_skip_naming_it(tmp_path):
    _, report = run_json(tmp_path, "run", str(CONVNET), "--stages", "compile", "--compile-backend", "no_such_backend")
    assert _stage(report, "compile")["status"] == "skip"
    assert "torch.compile has no backend 'no_such_backend' here" in _stage(report, "compile")["reason"]


@pytest.mark.slow
def test_the_openvino_compile_backend_failing_in_torchs_guard_code_is_the_environments_fault(tmp_path):
    """torch 2.13 asserts in its guard code under the openvino backend on a conv net, where the same model
    compiles with backend='eager'; a torch release where the backend works passes instead."""
    _, report = run_json(tmp_path, "run", str(CONVNET), "--stages", "compile", "--compile-backend", "openvino")
    stage = _stage(report, "compile")
    assert stage["status"] in ("pass", "broken-env"), stage
    if stage["status"] == "broken-env":
        [finding] = [f for f in report["findings"] if f["stage"] == "compile"]
        assert finding["kind"] == "broken-environment"
        assert "guard code" in finding["message"] and "compiles and runs with backend='eager'" in finding["message"]
        assert f"openvino {openvino.__version__.split('-')[0]}" in finding["message"]


@pytest.mark.skipif(not REAL_PYTHON, reason="needs the real-architecture environment (COMPATCHECK_REAL_PYTHON)")
def test_without_the_extra_the_stage_is_a_skip_naming_the_install(tmp_path):
    """The real-architecture environment has no openvino."""
    out = tmp_path / "report.json"
    run_cli("run", str(MODELS / "openvino_exact.py"), "--stages", "openvino", "--json", str(out), "--quiet",
            python=REAL_PYTHON)
    import json

    report = json.loads(out.read_text())
    assert verdicts(report)["openvino"] == "skip"
    assert "openvino is not installed: pip install 'compatcheck[openvino]'" in _stage(report)["reason"]


FORKS_IN_A_CONVERSION = """
import os, sys, torch, openvino
from openvino_telemetry import Telemetry
if sys.argv[1] == "declined":
    from compatcheck.stages.openvino import decline_telemetry
    decline_telemetry()
forks = []
os.register_at_fork(after_in_parent=lambda: forks.append(1))
openvino.convert_model(torch.nn.Linear(2, 2), example_input=torch.ones(1, 2))
Telemetry().force_shutdown(5.0)
print(len(forks))
"""


def _forks_in_a_conversion(home, telemetry: str) -> int:
    import os
    import subprocess
    import sys

    # No consent file in this home and no CI variable: OpenVINO's default is to send, each event forked.
    env = {key: value for key, value in os.environ.items() if key not in {"CI", "TF_BUILD", "JENKINS_URL"}}
    home.mkdir()
    done = subprocess.run([sys.executable, "-c", FORKS_IN_A_CONVERSION, telemetry], capture_output=True,
                          text=True, cwd=ROOT, env={**env, "HOME": str(home)}, timeout=120)
    assert done.returncode == 0, done.stderr[-2000:]
    return int(done.stdout.split()[-1])


def test_the_workers_conversions_fork_no_telemetry_sender(tmp_path):
    if _forks_in_a_conversion(tmp_path / "default", "default") == 0:
        pytest.skip("this OpenVINO forks no telemetry sender by default: nothing to decline")
    assert _forks_in_a_conversion(tmp_path / "declined", "declined") == 0
