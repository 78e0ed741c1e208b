"""The export and aot_inductor stages: the conv net end to end (one run, several assertions), the
skip without a C++ compiler, and reading which dimension an export error says was pinned."""

import json
import py_compile
import subprocess
import sys

import pytest

from tests.conftest import run_cli, run_json, verdicts


@pytest.fixture(scope="module")
def convnet(tmp_path_factory):
    """(process, report, artifacts folder) of one run of export, aot_inductor and onnx_export with --bench."""
    out = tmp_path_factory.mktemp("convnet")
    proc = run_cli("run", "models/convnet.py", "--stages", "export,aot_inductor,onnx_export", "--bench",
                   "--bench-seconds", "0.2", "--artifacts", str(out / "artifacts"), "--json", str(out / "report.json"),
                   "--quiet", env={"COMPATCHECK_CACHE_DIR": str(out / "cache")})
    assert (out / "report.json").exists(), proc.stdout + proc.stderr
    return proc, json.loads((out / "report.json").read_text()), out / "artifacts"


def _stage(report, name):
    return next(s for s in report["stages"] if s["name"] == name)


@pytest.mark.slow
def test_conv_net_passes_export_and_aot_inductor_on_both_batch_sizes(convnet):
    proc, report, _ = convnet
    assert verdicts(report) == {"eager": "pass", "export": "pass", "aot_inductor": "pass", "onnx_export": "pass"}
    assert proc.returncode == 0
    assert [shape[0][0] for shape in report["model"]["input_shapes"]] == [2, 5]
    for name in ("export", "aot_inductor"):
        stage = _stage(report, name)
        assert [(s["index"], s["ok"]) for s in stage["input_sets"]] == [(0, True), (1, True)]
    assert _stage(report, "export")["backend"] == "torch.export non-strict"


@pytest.mark.slow
def test_onnx_export_exports_the_model_itself_and_a_passing_run_tries_no_recipe(convnet):
    """The deployer's call on the model, not a translation of the export stage's program; and nothing is
    rebuilt another way where every stage passed."""
    _, report, _ = convnet
    assert _stage(report, "onnx_export")["backend"] == "dynamo exporter"
    assert [stage["recipes"] for stage in report["stages"]] == [[]] * len(report["stages"])


@pytest.mark.slow
def test_bench_times_the_aot_inductor_package_not_the_python_program(convnet):
    _, report, _ = convnet
    timed = {(t["label"], t["input_set"]) for s in report["stages"] for t in s["timings"]}
    assert {("aot_inductor", 0), ("aot_inductor", 1)} <= timed
    assert not {label for label, _ in timed} & {"export", "onnx_export"}


@pytest.mark.slow
def test_artifacts_keep_the_program_the_package_and_reproducers(convnet):
    _, report, out = convnet
    assert _stage(report, "export")["artifacts"]["export"].endswith("model.export.pt2")
    assert _stage(report, "aot_inductor")["artifacts"]["aot_inductor"].endswith("model.aoti.pt2")
    py_compile.compile(str(out / "reproduce_aot_inductor.py"), doraise=True)
    (out / "model.export.pt2").unlink()
    subprocess.run([sys.executable, str(out / "reproduce_export.py")], check=True, capture_output=True, timeout=300)
    assert (out / "model.export.pt2").exists()


@pytest.mark.slow
def test_aot_inductor_skips_without_a_cpp_compiler(tmp_path, monkeypatch):
    monkeypatch.setenv("CXX", str(tmp_path / "no-such-compiler"))
    proc, report = run_json(tmp_path, "run", "models/convnet.py", "--stages", "aot_inductor")
    assert verdicts(report) == {"eager": "pass", "export": "pass", "aot_inductor": "skip"}
    assert _stage(report, "aot_inductor")["reason"].startswith("no C++ compiler found")
    assert proc.returncode == 0


@pytest.mark.parametrize("message, pinned", [
    ("Constraints violated (L['x'].size()[0])!\n  - You marked L['x'].size()[0] as dynamic but your code "
     "specialized it to be a constant (2). If you're using mark_dynamic, ...", {"x.shape[0]": 2}),
    ("- Received user-specified dim hint Dim.DYNAMIC(min=None, max=None), but tracing inferred a static shape of 6 "
     "for dimension inputs['tokens'].shape[1].", {"tokens.shape[1]": 6}),
    ("Could not guard on data-dependent expression u0 > 3 (unhinted: u0 > 3)", {}),
])
def test_an_export_error_names_the_dimensions_it_pinned(message, pinned):
    from compatcheck.diagnose.shapes import pinned_dims

    try:
        raise RuntimeError("export failed") from ValueError(message)
    except RuntimeError as error:
        assert pinned_dims(error) == pinned


CEIL_PAD = '''
import math
import torch
import torch.nn.functional as F
from torch.export import Dim


class CeilPad(torch.nn.Module):
    def forward(self, x):
        n = math.ceil(x.shape[2] / 4)
        return F.pad(x, (0, 0, 0, n * 4 - x.shape[2]))


def get_model():
    return CeilPad()


def get_inputs():
    return [torch.randn(1, 2, 6, 3), torch.randn(1, 2, 9, 3)]


def get_dynamic_shapes():
    return ({2: Dim("h", min=2)},)
'''


def test_a_symbolic_node_save_cannot_serialize_is_named_at_the_line_that_made_it(tmp_path, write_model):
    """torch.export.save has no serializer for math.ceil on a dynamic size: the program exports and does not
    save. The finding says so at the user's line, offers the integer ceil division, and embeds no traceback."""
    _, report = run_json(tmp_path, "run", str(write_model(CEIL_PAD)), "--stages", "eager,export", "--no-cache",
                         timeout=300)
    export = next(s for s in report["stages"] if s["name"] == "export")
    assert export["status"] == "fail"
    finding = export["findings"][0]
    assert (finding["kind"], finding["op"], finding["line"]) == ("export-error", "math.ceil", 10)
    assert finding["message"].startswith("the program exported, but saving it failed on its math.ceil")
    assert finding["rewrite"] == "n = -(-x.shape[2] // 4)"
    # The static export the finding names is proven by the recipe search, not claimed.
    proven = [f for f in export["findings"] if f["kind"] == "passes-with"]
    assert any("static" in f["message"] for f in proven), export["recipes"]
    texts = [export["reason"], *(f["message"] for f in export["findings"]), json.dumps(export["recipes"])]
    assert not [text for text in texts if "Traceback" in text or "serialize.py" in text]
