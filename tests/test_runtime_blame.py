"""Who the onnxruntime stage blames when it does not answer as eager does, each checked by running it:
onnxruntime's graph optimizer (a lower level answers every input set as eager does), the exporter (ONNX's
reference evaluator differs from eager as onnxruntime does), and a file newer than onnxruntime reads."""

import onnx
import onnxruntime
import pytest
import torch

from compatcheck.compare import Tolerances
from compatcheck.diagnose.divergence import diverging
from compatcheck.diagnose.onnx_reference import Unfit, reference_outputs, reference_values
from compatcheck.diagnose.onnxruntime import too_new
from compatcheck.spec import InputSet
from tests.conftest import ROOT, run_json


def _onnxruntime_findings(report) -> list[dict]:
    return [f for f in report["findings"] if f["stage"] == "onnxruntime"]


def _blame(tmp_path, model: str, *options: str) -> tuple[dict, dict]:
    """The onnxruntime stage's one finding that is not a proven recipe, for tests/models/`model`, and the report."""
    _, report = run_json(tmp_path, "run", str(ROOT / "tests" / "models" / model), "--stages", "onnxruntime", *options)
    [finding] = [f for f in _onnxruntime_findings(report) if f["kind"] != "passes-with"]
    return finding, report


@pytest.mark.slow
def test_the_optimizer_is_blamed_with_the_level_that_brings_the_difference_and_the_nodes_it_fuses(tmp_path):
    finding, report = _blame(tmp_path, "residual_layernorm.py")
    assert finding["kind"] == "runtime-optimizer"
    assert "at ORT_ENABLE_BASIC every input set answers as eager does" in finding["message"]
    assert "ORT_ENABLE_EXTENDED brings the difference on input set 1" in finding["message"]
    assert "SkipLayerNormalization (com.microsoft)" in finding["message"]
    assert "GraphOptimizationLevel.ORT_ENABLE_BASIC" in finding["rewrite"]
    assert "ORT_ENABLE_EXTENDED: input set 1 differs" in finding["checked_by"]
    [route] = [r for r in report["routes"] if r["name"] == "ONNX → onnxruntime → Triton"]
    assert route["summary"].endswith("works with graph_optimization_level=ORT_ENABLE_BASIC (onnxruntime's "
                                     "SessionOptions), checked on every input set")


@pytest.mark.slow
@pytest.mark.parametrize("path", [ROOT / "models" / "sdpa_masked_row.py"], ids=lambda path: path.stem)
def test_a_model_only_the_other_exporter_gets_right_has_that_exporter_in_its_route(shared_runs, path):
    """Attention over a row whose mask hides every key: the dynamo exporter's graph attends to every key
    there, the TorchScript-based exporter's answers as eager does (torch 2.13)."""
    report = shared_runs.get(path).report
    [proven] = [f for f in _onnxruntime_findings(report) if f["kind"] == "passes-with"]
    assert proven["op"] == "dynamo=False (the TorchScript-based exporter)"
    assert "torch.onnx.export(model, args, path" in proven["rewrite"] and "dynamo=False" in proven["rewrite"]
    [route] = [r for r in report["routes"] if r["name"] == "ONNX → onnxruntime → Triton"]
    assert "works with dynamo=False (the TorchScript-based exporter), checked on every input set" in route["summary"]


@pytest.mark.slow
def test_the_exporter_is_blamed_where_the_reference_evaluator_differs_from_eager_too(tmp_path):
    """AdaptiveAvgPool2d on a second image size: the exported program already answers otherwise (torch 2.13),
    so neither onnxruntime nor its optimizer is blamed."""
    finding, _ = _blame(tmp_path, "adaptive_pool_dynamic.py")
    assert finding["kind"] == "export-divergence"
    assert "onnx.reference) differs from eager on input set 2 as onnxruntime does" in finding["message"]
    assert "torch.export's capture is the cause" in finding["message"]
    assert "input set 2 run in onnx.reference" in finding["checked_by"]
    assert "graph_optimization_level" not in finding["message"]


@pytest.mark.slow
def test_no_one_is_blamed_for_values_on_a_rounding_edge(tmp_path):
    """Quantized outputs: one quantum apart where the value sits on a rounding edge, at every optimization
    level and in onnx.reference too; eager, onnxruntime and onnx.reference each land on another side of
    some edges, so no one of them is blamed alone."""
    finding, _ = _blame(tmp_path, "qdq_conv.py", "--onnx-exporter", "legacy")
    assert finding["kind"] == "numeric-divergence"
    assert "neither onnxruntime nor the exporter is to blame alone" in finding["message"]
    assert "ORT_DISABLE_ALL" in finding["checked_by"]


class _Scaled(torch.nn.Module):
    def forward(self, x):
        return torch.tanh(x * 3.0) + torch.relu(x)


def _exported(tmp_path):
    x = torch.randn(4, 8)
    program = torch.onnx.export(_Scaled().eval(), (x,), dynamo=True, verbose=False)
    return program, InputSet((x,))


def test_a_graph_corrupted_after_export_is_blamed_on_the_exporter_at_the_corrupted_node(tmp_path):
    program, input_set = _exported(tmp_path)
    model = onnx.ModelProto.FromString(program.model_proto.SerializeToString())
    tanh = next(node for node in model.graph.node if node.op_type == "Tanh")
    tanh.op_type = "Sigmoid"  # what a wrong translation of tanh would be
    with torch.no_grad():
        eager = _Scaled()(*input_set.args)
    [answer] = reference_outputs(model, input_set)
    assert not torch.allclose(torch.from_numpy(answer), eager, atol=1e-4)
    found = diverging(program.exported_program, model, input_set, Tolerances(), reference_values)
    assert found is not None and str(found.fx_node.target) == "aten.tanh.default"
    assert found.onnx_ops == ["Sigmoid"]
    assert diverging(program.exported_program, program.model_proto, input_set, Tolerances(), reference_values) is None


def test_the_reference_evaluator_says_why_it_does_not_run_a_graph(tmp_path):
    program, input_set = _exported(tmp_path)
    model = onnx.ModelProto.FromString(program.model_proto.SerializeToString())
    model.graph.node[0].op_type = "NoSuchOp"
    with pytest.raises(Unfit, match="onnx.reference cannot load the graph: .*NoSuchOp"):
        reference_outputs(model, input_set)


@pytest.mark.parametrize("field, said", [("ir_version", "IR version 99 is newer than onnxruntime"),
                                         ("opset", "opset 99 (domain ai.onnx) is newer than onnxruntime")])
def test_a_file_newer_than_onnxruntime_reads_is_said_to_be_by_its_ir_version_or_its_opset(tmp_path, field, said):
    program, _ = _exported(tmp_path)
    model = program.model_proto
    if field == "ir_version":
        model.ir_version = 99
    else:
        next(one for one in model.opset_import if one.domain == "").version = 99
    path = tmp_path / "model.onnx"
    onnx.save(model, str(path))
    with pytest.raises(Exception) as raised:
        onnxruntime.InferenceSession(str(path), providers=["CPUExecutionProvider"])
    finding = too_new("onnxruntime", raised.value)
    assert finding.kind == "onnx-version" and said in finding.message
    assert ("the opset is not the cause" if field == "ir_version" else "the IR version is not the cause") in finding.message
