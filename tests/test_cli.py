"""The README's main command end to end, and what --artifacts keeps."""

import subprocess
import sys

import pytest

from tests.conftest import ROOT, run_cli, run_json, verdicts

# aot_inductor is left out: it compiles C++ for ~45 s on 2 cores, and tests/test_export.py runs it on this model.
CPU_STAGES = ["eager", "compile", "compile_fullgraph", "export", "jit_script", "jit_trace", "onnx_export",
              "onnxruntime"]


@pytest.mark.slow
def test_conv_net_with_two_batch_sizes_passes_all_cpu_stages(tmp_path):
    proc, report = run_json(tmp_path, "run", "models/convnet.py", "--skip", "triton,aot_inductor,openvino")
    assert proc.returncode == 0, proc.stdout + proc.stderr
    assert verdicts(report) == dict.fromkeys(CPU_STAGES, "pass")
    assert report["model"]["dynamic_shapes_inferred"] is True
    assert report["model"]["input_shapes"] == [[[2, 3, 32, 32]], [[5, 3, 32, 32]]]
    ort = next(s for s in report["stages"] if s["name"] == "onnxruntime")
    assert ort["backend"].endswith("CPUExecutionProvider")
    assert [s["index"] for s in ort["input_sets"]] == [0, 1] and ort["max_abs_error"] < 1e-4
    assert {"python", "torch", "onnx", "onnxruntime"} <= set(report["environment"])
    assert report["workers"] == 1
    assert {r["name"]: r["status"] for r in report["routes"]}["ONNX → onnxruntime → Triton"] == "works"
    assert "route ONNX → onnxruntime → Triton  works (up to onnxruntime; not checked: triton)" in proc.stdout


def test_mismatch_exits_1_and_table_says_why(tmp_path):
    proc, report = run_json(tmp_path, "run", "models/item_call.py", "--stages", "jit_trace")
    assert proc.returncode == 1
    assert verdicts(report) == {"eager": "pass", "jit_trace": "mismatch"}
    trace = report["stages"][1]
    assert trace["reason"].startswith("input set 2, output output: 100.0% of values off")
    leaf = trace["input_sets"][1]["leaves"][0]
    assert leaf["required_atol"] > 1 and leaf["worst_index"] is not None


def test_tolerance_option_turns_a_mismatch_into_a_pass(tmp_path):
    proc, report = run_json(tmp_path, "run", "models/item_call.py", "--stages", "jit_trace", "--atol", "1000")
    assert proc.returncode == 0 and verdicts(report)["jit_trace"] == "pass"


def test_selecting_onnxruntime_runs_the_export_it_needs(tmp_path):
    proc, report = run_json(tmp_path, "run", "models/where_scatter_gather.py", "--stages", "onnxruntime")
    assert verdicts(report) == {"eager": "pass", "onnx_export": "pass", "onnxruntime": "pass"}


def test_failed_export_makes_onnxruntime_skip_with_the_reason(tmp_path):
    proc, report = run_json(tmp_path, "run", "models/data_dependent_if.py", "--stages", "onnxruntime")
    assert verdicts(report) == {"eager": "pass", "onnx_export": "fail", "onnxruntime": "skip"}
    line = (ROOT / "models" / "data_dependent_if.py").read_text().splitlines().index("        if x.sum() > 0:") + 1
    assert report["stages"][2]["reason"] == ("needs the artifact of onnx_export, which did not produce one "
                                             f"(fail: data-dependent-guard at data_dependent_if.py:{line})")


def test_artifacts_keep_files_inputs_and_runnable_reproducers(tmp_path):
    out = tmp_path / "artifacts"
    proc, report = run_json(tmp_path, "run", "models/dict_outputs.py", "--stages", "jit_script,onnxruntime",
                            "--artifacts", str(out))
    assert proc.returncode == 0
    assert {"model.onnx", "model.script.pt", "inputs.npz", "reproduce_onnxruntime.py",
            "reproduce_jit_script.py"} <= {p.name for p in out.iterdir()}
    assert report["stages"][-1]["artifacts"] == {} and report["stages"][-2]["artifacts"]["onnx_export"].endswith(
        "model.onnx")
    (out / "model.onnx").unlink()
    for script in ("reproduce_onnx_export.py", "reproduce_onnxruntime.py"):
        subprocess.run([sys.executable, str(out / script)], check=True, capture_output=True, timeout=300)
    assert (out / "model.onnx").exists()


@pytest.mark.parametrize("argv", [["--version"], ["--help"], ["run", "--help"]])
def test_version_and_help_load_no_torch(argv):
    code = ("import sys, atexit\n"
            "atexit.register(lambda: print(sorted({'torch', 'numpy', 'onnx'} & set(sys.modules))))\n"
            f"sys.argv = ['compatcheck', *{argv!r}]\n"
            "from compatcheck.cli import main\n"
            "main()\n")
    proc = subprocess.run([sys.executable, "-c", code], cwd=ROOT, capture_output=True, text=True, timeout=60)
    assert proc.returncode == 0, proc.stderr
    assert proc.stdout.strip().endswith("[]")
    if argv == ["--version"]:
        assert proc.stdout.startswith("compatcheck 0.1.0\n")


def test_legacy_exporter_exports_the_dynamic_batch(tmp_path):
    proc, report = run_json(tmp_path, "run", "models/convnet.py", "--stages", "onnxruntime",
                            "--onnx-exporter", "legacy")
    assert verdicts(report) == {"eager": "pass", "onnx_export": "pass", "onnxruntime": "pass"}, proc.stdout
    assert report["stages"][1]["backend"] == "legacy exporter"


def test_documented_schema_is_the_one_the_code_writes():
    proc = run_cli("schema", timeout=30)
    assert proc.returncode == 0
    assert proc.stdout.strip() == (ROOT / "docs" / "report.schema.json").read_text().strip(), (
        "docs/report.schema.json is stale: regenerate it with `compatcheck schema > docs/report.schema.json`")


def test_bench_times_every_passing_artifact_and_draws_them(tmp_path):
    from xml.etree import ElementTree

    out = tmp_path / "artifacts"
    proc, report = run_json(tmp_path, "run", "models/convnet.py", "--stages", "jit_trace,onnxruntime", "--bench",
                            "--bench-seconds", "0.3", "--artifacts", str(out), "--markdown", str(tmp_path / "c.md"))
    assert proc.returncode == 0
    timings = {(t["label"], t["input_set"]): t for s in report["stages"] for t in s["timings"]}
    # onnx_export's exported program is a checking aid, not a deployment target: it is not timed.
    assert set(timings) == {(label, i) for label in ("eager", "jit_trace", "onnxruntime") for i in (0, 1)}
    for timing in timings.values():
        assert 0 < timing["p50_ms"] <= timing["p95_ms"] and timing["iterations"] >= 10
    assert timings[("eager", 1)]["speedup_vs_eager"] == 1.0
    assert timings[("onnxruntime", 1)]["throughput"] == pytest.approx(5 / timings[("onnxruntime", 1)]["p50_ms"] * 1e3)
    assert "deployment speed (--bench)" in proc.stdout
    speed = (tmp_path / "c.md").read_text().split("## Deployment speed", 1)[1]
    assert speed.count("| `onnxruntime` |") == 2 and "| `eager` | 1 |" in speed
    bars = ElementTree.parse(out / "latency.svg").getroot().findall("{http://www.w3.org/2000/svg}rect")
    assert len(bars) == len(timings)


def test_the_command_process_never_imports_torch():
    code = ("import sys, atexit\n"
            "atexit.register(lambda: print('torch imported' if 'torch' in sys.modules else 'no torch'))\n"
            "sys.argv = ['compatcheck', 'run', 'models/convnet.py', '--stages', 'eager', '-q']\n"
            "from compatcheck.cli import main\n"
            "main()\n")
    proc = subprocess.run([sys.executable, "-c", code], cwd=ROOT, capture_output=True, text=True, timeout=300)
    assert proc.returncode == 0, proc.stderr
    assert proc.stdout.strip().endswith("no torch")
