"""Proven recipes: where the plain call fails, the other ways of building the stage are tried on a pristine
model, and one that passes on every input set is a `passes-with` finding with the exact call; one that
does not help is listed as tried in the stage's `recipes` and never offered. The verdict stays the plain
call's."""

import json
import textwrap

import pytest

from compatcheck.report.markdown import checklist
from compatcheck.report.model import Report
from tests.conftest import MODELS, ROOT, run_cli
from tests.test_verdict_causes import load


def stage(report: dict, name: str) -> dict:
    return next(s for s in report["stages"] if s["name"] == name)


def offered(report: dict, name: str) -> list[dict]:
    return [f for f in report["findings"] if f["stage"] == name and f["kind"] == "passes-with"]


def test_the_program_of_torch_export_passes_where_the_usual_onnx_call_fails():
    """torch.onnx.export captures with sizes 0 and 1 allowed, so a guard torch.export proves from a dynamic
    size of at least 2 is data-dependent there (torch_geometric's GAT): the verdict is the usual call's
    fail, and the program route is offered with both calls."""
    from compatcheck import check

    module = load(ROOT / "tests" / "models" / "size_oblivious_guard.py")
    report = json.loads(check(module.get_model(), module.get_inputs(), isolate=False, cache=False,
                              stages=["eager", "onnx_export", "onnxruntime"]).model_dump_json())
    assert {s["name"]: s["status"] for s in report["stages"]} == {
        "eager": "pass", "onnx_export": "fail", "onnxruntime": "skip"}
    assert "data-dependent guard" in stage(report, "onnx_export")["reason"]
    [finding] = offered(report, "onnx_export")
    assert "the program of torch.export.export" in finding["message"] and "checked on every input set" in finding["message"]
    assert finding["rewrite"].splitlines() == [
        "program = torch.export.export(model, args, kwargs, dynamic_shapes=dynamic_shapes)",
        "onnx_program = torch.onnx.export(program, args, kwargs=kwargs, dynamic_shapes=dynamic_shapes, verbose=False, "
        "dynamo=True)"]
    tried = stage(report, "onnx_export")["recipes"]
    assert any(line.startswith("the inferred dims as Dim.AUTO") and ": fails too, stopped in onnx_export at the build: "
               in line for line in tried)
    assert "Dim.AUTO" not in json.dumps(offered(report, "onnx_export"))  # tried, did not help: not offered
    text = checklist(Report.model_validate(report))
    assert "torch.onnx.export(program, args" in text and "program = torch.export.export(model" in text


def test_optimize_false_is_offered_where_the_exporters_graph_optimizer_fails():
    """torchvision RAFT's cat-then-chunk of its two images: the optimizer's constant folding fails on the
    chunk. The reason names the optimizer's pass and the error beneath it (not a pass manager object), and
    optimize=False is tried first, since capture and translation had succeeded."""
    from compatcheck import check

    module = load(ROOT / "tests" / "models" / "split_after_cat.py")
    report = json.loads(check(module.get_model(), module.get_inputs(), isolate=False, cache=False,
                              stages=["eager", "onnx_export", "onnxruntime"]).model_dump_json())
    export = stage(report, "onnx_export")
    assert export["status"] == "fail"
    assert export["reason"].startswith("OnnxExportFailed: the exporter's graph optimizer failed: FoldConstantsPass "
                                       "raised RuntimeError: Error during constant folding"), export["reason"]
    assert "object at 0x" not in export["reason"]
    assert export["recipes"] == ["optimize=False (the exporter's graph optimizer left out): passes on every input set"]
    [finding] = offered(report, "onnx_export")
    assert finding["rewrite"] == ("onnx_program = torch.onnx.export(model, args, kwargs=kwargs, "
                                  "dynamic_shapes=dynamic_shapes, verbose=False, optimize=False, dynamo=True)")


def test_an_error_chained_to_itself_is_read_once():
    """`raise exc from exc` makes a cause chain that loops: reading it must end (it hung the worker on RAFT)."""
    from compatcheck.diagnose.dynamic_dims import is_specialization
    from compatcheck.errors import chain

    error = RuntimeError("no ONNX function")
    error.__cause__ = error
    assert list(chain(error)) == [error] and list(chain(error, contexts=False)) == [error]
    assert is_specialization(error) is False


@pytest.mark.parametrize("path", [MODELS / "numpy_forward.py"], ids=["numpy_forward"])
def test_strict_mode_is_offered_where_the_default_non_strict_export_fails(shared_runs, path):
    """Non-strict export cannot run .numpy() on its fake tensors; dynamo (strict) traces numpy, and the
    program matches eager on both input sets."""
    report = shared_runs.get(path).report
    assert stage(report, "export")["status"] == "fail" and stage(report, "export")["backend"] == "torch.export non-strict"
    [finding] = offered(report, "export")
    assert finding["rewrite"] == ("program = torch.export.export(model, args, kwargs, dynamic_shapes=dynamic_shapes, "
                                  "strict=True)")
    assert stage(report, "export")["recipes"] == ["strict=True (the other export mode): passes on every input set"]


@pytest.mark.parametrize("path", [MODELS / "sdpa_3d.py"], ids=["sdpa_3d"])
def test_the_other_exporter_is_offered_where_the_dynamo_exporter_has_no_translation(shared_runs, path):
    """The dynamo exporter's attention function takes 4-D tensors only; the TorchScript exporter
    translates 3-D attention, and its ONNX file matches eager in onnxruntime on both input sets."""
    from compatcheck.torch_features import LEGACY_EXPORTER, missing

    if missing(LEGACY_EXPORTER):
        pytest.skip(missing(LEGACY_EXPORTER))
    report = shared_runs.get(path).report
    assert stage(report, "onnx_export")["status"] == "fail"
    [finding] = offered(report, "onnx_export")
    assert finding["op"] == "dynamo=False (the TorchScript-based exporter)"
    assert finding["rewrite"].splitlines()[0] == "# path: where the ONNX file is written"
    assert finding["rewrite"].splitlines()[1].startswith("torch.onnx.export(model, args, path, kwargs=kwargs, ")
    assert finding["rewrite"].endswith("dynamo=False)")
    assert "dynamic_axes={'input0': {0: 'input0_dim0'}}" in finding["rewrite"]


# A library's attention layer with a switch read at forward time (timm's Attention has `fused_attn`): the
# fused path calls 3-D scaled_dot_product_attention, which the dynamo exporter cannot translate.
ATTENTION = textwrap.dedent("""
    import torch
    from torch.nn import functional as F


    class Attention(torch.nn.Module):
        def __init__(self, width=8):
            super().__init__()
            self.qkv = torch.nn.Linear(width, 3 * width)
            self.fused_attn = True
            self.norm_first = False

        def forward(self, x):
            q, k, v = self.qkv(x).chunk(3, dim=-1)
            if self.fused_attn:
                return F.scaled_dot_product_attention(q, k, v)
            weights = (q @ k.transpose(-2, -1) / q.shape[-1] ** 0.5).softmax(dim=-1)
            return weights @ v
""")

CATALOG = textwrap.dedent("""
    - id: attention-norm-first
      title: the attention's normalization applied first
      library: timm
      words: [scaled_dot_product_attention]
      stages: [onnx_export]
      setting: {attribute: norm_first, value: true}
    - id: attention-unfused
      title: attention computed with matmul and softmax instead of scaled_dot_product_attention
      library: timm
      words: [scaled_dot_product_attention]
      stages: [onnx_export]
      setting: {attribute: fused_attn, value: false}
""")


def test_a_catalog_setting_that_helps_is_offered_and_one_that_does_not_is_absent(tmp_path):
    site = tmp_path / "site-packages"
    (site / "timm").mkdir(parents=True)
    (site / "timm" / "__init__.py").write_text("")
    (site / "timm" / "attention.py").write_text(ATTENTION)
    model = tmp_path / "model.py"
    model.write_text(textwrap.dedent("""
        import torch
        from timm.attention import Attention


        def get_model():
            return Attention().eval()


        def get_inputs():
            return [torch.randn(2, 5, 8), torch.randn(3, 7, 8)]
    """))
    catalog = tmp_path / "recipes.yaml"
    catalog.write_text(CATALOG)
    out = tmp_path / "report.json"
    proc = run_cli("run", str(model), "--stages", "eager,onnx_export,onnxruntime", "--rewrites", str(catalog),
                   "--json", str(out), "-q", "--no-cache", env={"PYTHONPATH": str(site)})
    report = json.loads(out.read_text())
    assert stage(report, "onnx_export")["status"] == "fail", proc.stdout
    first, second = stage(report, "onnx_export")["recipes"]
    assert first.startswith("the attention's normalization applied first: fails too, stopped in onnx")
    assert second == ("attention computed with matmul and softmax instead of scaled_dot_product_attention: passes on "
                      "every input set")
    [finding] = offered(report, "onnx_export")
    assert finding["op"] == "attention computed with matmul and softmax instead of scaled_dot_product_attention"
    assert finding["rewrite"].splitlines()[0] == "model.fused_attn = False"
    assert "norm_first" not in json.dumps(report["findings"])


# A library's layer whose default path branches on the data (an export blocker) and a switch that avoids it;
# the first input set has size 1 in the token dim, the next blocker once the switch is on.
MIXER = textwrap.dedent("""
    import torch


    class Mixer(torch.nn.Module):
        def __init__(self):
            super().__init__()
            self.fused = True
            self.proj = torch.nn.Linear(8, 8)

        def forward(self, x):
            if self.fused and x.abs().sum() >= 0:
                return self.proj(x)
            return self.proj(x)
""")


def test_a_recipe_past_the_first_blocker_is_combined_with_the_recipe_for_the_next_and_every_try_is_listed(tmp_path):
    site = tmp_path / "site-packages"
    (site / "timm").mkdir(parents=True)
    (site / "timm" / "__init__.py").write_text("")
    (site / "timm" / "mixer.py").write_text(MIXER)
    model = tmp_path / "model.py"
    model.write_text("import torch\nfrom timm.mixer import Mixer\n\n\ndef get_model():\n    return Mixer().eval()\n\n\n"
                     "def get_inputs():\n    return [torch.randn(2, 1, 8), torch.randn(3, 4, 8)]\n")
    catalog = tmp_path / "recipes.yaml"
    catalog.write_text("- {id: mixer-unfused, title: the unfused path, library: timm, words: [fused], "
                       "stages: [export], setting: {attribute: fused, value: false}}\n")
    out, markdown = tmp_path / "report.json", tmp_path / "CHECKLIST.md"
    proc = run_cli("run", str(model), "--stages", "eager,export", "--rewrites", str(catalog), "--json", str(out),
                   "--markdown", str(markdown), "--no-cache", env={"PYTHONPATH": str(site)})
    report = json.loads(out.read_text())
    alone, both = stage(report, "export")["recipes"]
    assert alone.startswith("the unfused path: fails too, stopped in export at the build: ") and "Dim.DYNAMIC" in alone
    assert alone.endswith("the search goes on adding input set 2 as the sample")
    assert both == "the unfused path, with input set 2 as the sample: passes on every input set"
    [finding] = offered(report, "export")
    assert finding["rewrite"].splitlines()[0] == "model.fused = False"
    assert "export recipes tried:" in proc.stdout and "Recipes tried" in markdown.read_text()
    for line in (alone, both):
        assert line.split(":")[0] in " ".join(proc.stdout.split()) and line.split(":")[0] in markdown.read_text()
