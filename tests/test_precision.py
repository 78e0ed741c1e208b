"""--dtype float16/bfloat16 (docs/precision.md): the conv net gets the verdicts models/convnet.py writes
down for each setting, a model that overflows float16 gets the finding at its line and a proven float32
set, blocks inside nn.ModuleList, nn.Sequential and nn.ModuleDict get them by their qualified names, with
neighbours kept float32 together, in a set that, pasted into the model file, makes it pass, and small
normal activations raise no alarm. The
runs are real `compatcheck run` processes, two at a time; the rule and the search are also checked
directly on tensors."""

import copy
import json
import math
import re
from concurrent.futures import ThreadPoolExecutor

import pytest
import torch

from compatcheck.compare import compare_leaf
from compatcheck.diagnose.float32_set import KEEP_FLOAT32, ddmin
from compatcheck.errors import UsageError
from compatcheck.options import cache_key_values, parse
from compatcheck.report.model import SCHEMA_VERSION, migrate
from compatcheck.spec import InputSet, cast_inputs, cast_model
from compatcheck.triton.local import LocalLauncher
from tests.conftest import MODELS, ROOT, run_cli, verdicts
from tests.shared_runs import literal

CONVNET = MODELS / "convnet.py"
OVERFLOW = ROOT / "tests" / "models" / "float16_overflow.py"
CONTAINERS = ROOT / "tests" / "models" / "float16_containers.py"
SMALL = ROOT / "tests" / "models" / "small_activations.py"
# AOTInductor compiles C++ for about 45 s a model: its verdicts come from a full run (docs/precision.md).
LADDER = "eager,compile,compile_fullgraph,export,jit_script,jit_trace,onnx_export,onnxruntime,triton"
# The runs, by name: (model, flags).
RUNS = {
    "float16": (CONVNET, ["--stages", LADDER, "--compile-backend", "aot_eager", "--dtype", "float16"]),
    "bfloat16": (CONVNET, ["--stages", LADDER, "--compile-backend", "aot_eager", "--dtype", "bfloat16"]),
    "bfloat16 opset 22": (CONVNET, ["--stages", "onnx_export,onnxruntime,triton", "--dtype", "bfloat16",
                                    "--onnx-opset", "22"]),
    "overflow": (OVERFLOW, ["--stages", "eager,jit_trace", "--dtype", "float16"]),
    "small": (SMALL, ["--stages", "eager", "--dtype", "float16"]),
    "containers": (CONTAINERS, ["--stages", "eager", "--dtype", "float16"]),
}
TABLES = {"float16": "EXPECTED_FLOAT16", "bfloat16": "EXPECTED_BFLOAT16",
          "bfloat16 opset 22": "EXPECTED_BFLOAT16_OPSET_22"}
PRE_FLIGHT = {"overflow", "subnormal", "non-finite", "keep-float32"}


def run(folder, model, flags, markdown=False):
    """(process, report) of one `compatcheck run` writing into `folder` (with `markdown`, the checklist
    too, as checklist.md)."""
    folder.mkdir(parents=True)
    extra = ["--markdown", str(folder / "checklist.md")] if markdown else []
    proc = run_cli("run", str(model), *flags, "--json", str(folder / "report.json"), "--quiet", *extra,
                   env={"COMPATCHECK_CACHE_DIR": str(folder / "cache")})
    assert (folder / "report.json").exists(), proc.stdout + proc.stderr
    return proc, json.loads((folder / "report.json").read_text())


@pytest.fixture(scope="module")
def runs(tmp_path_factory):
    """Every run of RUNS, two at a time, by name."""
    base = tmp_path_factory.mktemp("precision")
    with ThreadPoolExecutor(2) as pool:
        futures = {name: pool.submit(run, base / name.replace(" ", "_"), model, flags, name == "float16")
                   for name, (model, flags) in RUNS.items()}
        done = {name: future.result() for name, future in futures.items()}
    return {**done, "float16 checklist": base / "float16" / "checklist.md"}


def expected(name):
    table = dict(literal(CONVNET, TABLES[name]))
    table.pop("aot_inductor", None)
    if LocalLauncher.unavailable() is not None:  # no tritonserver here: the stage skips before it runs
        table["triton"] = "skip"
    return table


def stage(report, name):
    return next(s for s in report["stages"] if s["name"] == name)


def findings(report, kind):
    return [f for f in report["findings"] if f["kind"] == kind]


def line_of(path, text):
    return next(n for n, line in enumerate(path.read_text().splitlines(), 1) if text in line)


@pytest.mark.slow
@pytest.mark.parametrize("name", list(TABLES))
def test_conv_net_gets_the_verdicts_written_down_for_each_dtype(runs, name):
    proc, report = runs[name]
    assert verdicts(report) == expected(name), proc.stdout
    assert report["options"]["dtype"] == RUNS[name][1][RUNS[name][1].index("--dtype") + 1]
    assert not {f["kind"] for f in report["findings"]} & PRE_FLIGHT  # its activations are well inside the range


@pytest.mark.slow
def test_float16_stages_report_fidelity_and_distance_and_onnxruntime_says_it_upcasts(runs):
    _, report = runs["float16"]
    for one in report["stages"]:
        if one["status"] != "pass":
            continue
        precision = one["precision"]
        assert precision["dtype"] == "float16"
        assert 0 < precision["fp64_error"] and precision["eager_fp64_error"] > 0 and precision["allowed"] is None
        assert 0 < precision["float32_error"] < 1e-3
        assert one["reason"].startswith("float16: every element within twice eager float16's distance to float64 at "
                                        "its magnitude; rms error to float64")
        leaves = [leaf for s in one["input_sets"] for leaf in s["leaves"]]
        assert leaves and all(leaf["fp64_error"] is not None for leaf in leaves)
    assert re.fullmatch(r"CPUExecutionProvider computes Conv(, \w+)* in float32: .*",
                        stage(report, "onnxruntime")["precision"]["upcast"])
    assert stage(report, "eager")["precision"]["upcast"] is None
    checklist = runs["float16 checklist"].read_text()
    assert "## Precision" in checklist and "| `onnxruntime` |" in checklist.split("## Precision")[1]


@pytest.mark.slow
def test_bfloat16_onnx_export_names_the_op_and_the_opset_that_brings_it(runs):
    _, report = runs["bfloat16"]
    export = findings(report, "invalid-graph")
    assert [(f["stage"], f["op"]) for f in export if f["stage"] == "onnx_export"] == [("onnx_export", "Conv")]
    assert "export with opset_version=22" in export[0]["message"]
    missing = {f["op"] for f in findings(report, "missing-kernel") if f["stage"] == "onnxruntime"}
    assert {"Conv", "Gemm"} <= missing


@pytest.mark.slow
def test_bfloat16_at_opset_22_names_the_float32_weight_and_the_missing_kernels(runs):
    _, report = runs["bfloat16 opset 22"]
    export = [f for f in findings(report, "invalid-graph") if f["stage"] == "onnx_export"]
    assert "W is the initializer features.0.weight, stored as float" in export[0]["message"]
    missing = [f for f in findings(report, "missing-kernel") if f["stage"] == "onnxruntime"]
    assert any(f["op"] == "Conv" and "Conv(22) with T=bfloat16" in f["message"] for f in missing)


@pytest.mark.slow
def test_overflow_is_found_at_its_line_with_the_first_op_and_a_proven_float32_set(runs):
    proc, report = runs["overflow"]
    assert verdicts(report) == {"eager": "mismatch", "jit_trace": "skip"}, proc.stdout
    assert "NaN/Inf where the float64 run has finite ones" in stage(report, "eager")["reason"]
    [overflow] = findings(report, "overflow")
    assert (overflow["op"], overflow["line"]) == ("Linear", line_of(OVERFLOW, "self.up = nn.Linear"))
    assert "module block.up (Linear)" in overflow["message"] and "65504" in overflow["message"]
    [first] = findings(report, "non-finite")
    assert (first["op"], first["line"]) == ("aten.addmm", line_of(OVERFLOW, "return self.norm(self.up(x))"))
    assert "input set 2" in first["message"]
    [kept] = findings(report, "keep-float32")
    assert (kept["op"], kept["line"]) == ("block", line_of(OVERFLOW, "self.block = Block()"))
    assert "putting any one of them back into float16 brings NaN/Inf back" in kept["message"]
    assert "KEEP_FLOAT32 = ['block']" in kept["rewrite"]


@pytest.mark.slow
def test_blocks_in_containers_are_found_by_their_qualified_names_and_neighbours_kept_together(runs):
    proc, report = runs["containers"]
    assert verdicts(report) == {"eager": "mismatch"}, proc.stdout
    overflows = {re.search(r"module (\S+) \(", f["message"])[1]: f["line"] for f in findings(report, "overflow")}
    assert overflows == {"layers.1": line_of(CONTAINERS, "self.layers = nn.ModuleList"),
                         "layers.2.lin": line_of(CONTAINERS, "self.lin = nn.Linear(16, 16)"),
                         "stack.1": line_of(CONTAINERS, "self.stack = nn.Sequential"),
                         "stack.2.lin": line_of(CONTAINERS, "self.lin = nn.Linear(16, 16)"),
                         "heads.mix.up": line_of(CONTAINERS, "self.up = Up()")}
    [first] = findings(report, "non-finite")
    assert (first["op"], first["line"]) == ("aten.mul", line_of(CONTAINERS, "return self.lin(x) * 1e5"))
    assert "in module layers.1 (Up)" in first["message"]
    [kept] = findings(report, "keep-float32")
    # the list's and the Sequential's Up with the block after it, together; the dict's block on its own
    assert "KEEP_FLOAT32 = [['layers.1', 'layers.2'], ['stack.1', 'stack.2'], 'heads.mix']" in kept["rewrite"]
    assert kept["line"] == line_of(CONTAINERS, "self.layers = nn.ModuleList")
    assert "putting any one of them back into float16 brings NaN/Inf back" in kept["message"]


@pytest.mark.slow
def test_the_float32_set_pasted_into_the_model_file_passes(runs, tmp_path):
    """The keep-float32 rewrite, pasted as it is: the model built with it passes in float16."""
    _, report = runs["containers"]
    [kept] = findings(report, "keep-float32")
    code, call = kept["rewrite"].rsplit("\n", 1)
    assert call == "model = keep_float32(model, KEEP_FLOAT32, torch.float16)"
    source = CONTAINERS.read_text().replace("def get_model():\n    return Containers().eval()",
                                            f"{code}\n\n\ndef get_model():\n    model = Containers().eval()\n"
                                            f"    {call}\n    return model")
    applied = tmp_path / "applied.py"
    applied.write_text(source)
    proc, fixed = run(tmp_path / "run", applied, ["--stages", "eager,jit_trace", "--dtype", "float16"])
    assert verdicts(fixed) == {"eager": "pass", "jit_trace": "pass"}, proc.stdout
    assert not {f["kind"] for f in fixed["findings"]} & PRE_FLIGHT  # kept float32 there: nothing to say


def test_neighbours_kept_together_pass_float32_between_them_and_kept_apart_do_not():
    """keep_float32 as pasted: a module that scales past float16's range and the LayerNorm after it give
    finite outputs kept float32 as one group, and Inf kept as two, cast to float16 between them."""
    namespace: dict = {}
    exec(KEEP_FLOAT32, namespace)
    torch.manual_seed(0)
    up, x = torch.nn.Linear(16, 16), torch.randn(4, 16)
    with torch.no_grad():
        up.weight.mul_(1e5)

    def built(names):
        model = torch.nn.Sequential(torch.nn.Linear(16, 16), copy.deepcopy(up), torch.nn.LayerNorm(16),
                                    torch.nn.Linear(16, 4))
        return namespace["keep_float32"](model, names, torch.float16)

    with torch.no_grad():
        together = built([["1", "2"]])(x.half())
        apart = built(["1", "2"])(x.half())
    assert together.dtype == torch.float16 and bool(torch.isfinite(together).all())
    assert not bool(torch.isfinite(apart).all())


@pytest.mark.slow
def test_small_normal_activations_raise_no_alarm(runs):
    proc, report = runs["small"]
    assert verdicts(report) == {"eager": "pass"}, proc.stdout
    assert report["findings"] == []


def test_dtype_is_an_option_of_every_door_and_of_the_cache_key():
    chosen = parse({"dtype": "bfloat16"})
    assert chosen.run_options().dtype == "bfloat16"
    assert cache_key_values(chosen.run_options())["dtype"] == "bfloat16"
    assert parse({}).run_options().dtype == "float32"
    with pytest.raises(UsageError, match="--dtype must be float32, float16 or bfloat16, got 'float8'"):
        parse({"dtype": "float8"}, flags=True)


def test_the_cast_leaves_integer_inputs_and_a_model_its_author_cast():
    ids, x = torch.tensor([1, 2]), torch.randn(2, 3)
    [one] = cast_inputs([InputSet((x, ids), {"mask": ids > 1})], torch.float16)
    assert [t.dtype for t in one.leaves()] == [torch.float16, torch.int64, torch.bool]
    model = torch.nn.Sequential(torch.nn.Linear(3, 3), torch.nn.Linear(3, 3))
    assert cast_model(model, torch.float16)[1].weight.dtype == torch.float16
    model[1].float()  # the author keeps the last layer in float32
    assert cast_model(model, torch.float16)[1].weight.dtype == torch.float32


def _judged(truth, eager, stage, answer=None):
    """compare_leaf by the reduced-precision rule, for float16 outputs."""
    return compare_leaf("out", eager, stage, 1e-3, 1e-3, fp64=lambda: truth,
                        float32=lambda: truth.float() if answer is None else answer)


def test_the_rule_accepts_a_backend_more_precise_than_eager_and_refuses_one_beyond_twice_its_error():
    torch.manual_seed(0)
    truth = torch.randn(1000, dtype=torch.float64) * 10
    eager = (truth + 0.02 * torch.randn(1000, dtype=torch.float64)).half()  # float16's error piled up on the way
    upcast = _judged(truth, eager, truth.half())  # computed in float32, rounded to float16 once at the end
    assert upcast.ok and upcast.fp64_error < upcast.eager_fp64_error
    assert "within 2 × eager float16's" in upcast.fp64_verdict
    worse = (truth + 0.1 * torch.randn(1000, dtype=torch.float64)).half()
    far = _judged(truth, eager, worse)
    assert not far.ok and far.fp64_error > 2 * far.eager_fp64_error + 1e-4
    assert "beyond 2 × eager float16's distance to the float64 run at the element's magnitude" in far.problem
    assert far.float32_error == pytest.approx(float((worse.double() - truth.float().double()).abs().max()))


def test_the_rule_refuses_nan_and_inf_where_float64_is_finite_even_for_eager():
    truth = torch.tensor([1.0, 2.0, 70000.0], dtype=torch.float64)
    eager = truth.half()  # 70000 is Inf in float16
    judged = _judged(truth, eager, eager)
    assert not judged.ok and "1 of 3 values NaN/Inf where the float64 run has finite ones" in judged.problem
    assert math.isfinite(judged.float32_error)


def test_the_rule_uses_the_float32_answers_where_the_model_refuses_float64():
    answer = torch.tensor([1.0, 2.0, 3.0])
    judged = compare_leaf("out", answer.half(), answer.half(), 1e-3, 1e-3, fp64=lambda: RuntimeError("no kernel"),
                          float32=lambda: answer)
    assert judged.ok and "the float32 answers (no float64 run: no kernel)" in judged.fp64_verdict


def test_delta_debugging_finds_a_1_minimal_set_and_says_when_cut_short():
    def holds(names):  # needs a and c together, or d alone
        return {"a", "c"} <= set(names) or "d" in names

    found, minimal = ddmin(list("abcef"), holds, lambda: False)
    assert minimal and sorted(found) == ["a", "c"]
    assert all(not holds([n for n in found if n != one]) for one in found)
    found, minimal = ddmin(list("abcef"), holds, lambda: True)
    assert not minimal and found == list("abcef")


def test_reports_before_schema_version_5_read_as_judged_in_float32_on_the_cpu():
    for version in (2, 3, 4):
        migrated = migrate({"schema_version": version, "options": {"atol": None}})
        assert migrated["options"] == {"dtype": "float32", "device": "cpu", "atol": None}
        assert migrated["schema_version"] == SCHEMA_VERSION
    assert migrate({"schema_version": 5, "options": {"dtype": "float16"}})["options"] == {"dtype": "float16"}
