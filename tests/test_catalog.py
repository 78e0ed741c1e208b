"""The rewrite catalog: its schema, a user's file merged over it, and an example for every entry."""

import json
import textwrap

import pytest

from compatcheck.diagnose.catalog import BUILTIN, load, parse
from compatcheck.errors import UsageError
from compatcheck.report.model import Finding
from tests.conftest import MODELS, run_cli
from tests.shared_runs import literal
from tests.test_findings import MODELS_WITH_FINDINGS, expected_findings

# What the catalog must cover: a finding each of these would give -> the entry it must get.
REQUIRED = {
    "searchsorted": (("onnx_export", "unsupported-op", "aten.searchsorted.Tensor"), "searchsorted"),
    "erfinv": (("onnx_export", "unsupported-op", "aten.erfinv"), "erfinv"),
    "lgamma": (("onnx_export", "unsupported-op", "aten.lgamma"), "gamma-functions"),
    "median(dim)": (("onnx_export", "unsupported-op", "aten.median.dim"), "median-dim"),
    "mode": (("onnx_export", "unsupported-op", "aten.mode"), "mode"),
    "cdist": (("onnx_export", "unsupported-op", "aten._cdist_forward"), "cdist"),
    "index_reduce": (("onnx_export", "unsupported-op", "aten.index_reduce"), "index-reduce"),
    "torch.where": (("onnx_export", "unsupported-op", "aten.where.self"), "where"),
    "scatter": (("onnx_export", "unsupported-op", "aten.scatter_add"), "scatter"),
    "gather": (("onnx_export", "unsupported-op", "aten.gather"), "gather"),
    "masked_fill": (("onnx_export", "unsupported-op", "aten.masked_fill.Scalar"), "masked-fill"),
    "torch.stack": (("onnx_export", "unsupported-op", "aten.stack"), "stack"),
    "nn.MultiheadAttention masks": (("onnx_export", "unsupported-op", "aten._native_multi_head_attention"),
                                    "multihead-attention-masks"),
    "numpy calls": (("jit_script", "unsupported-python", "numpy.sqrt", "scale = np.sqrt(y.numpy())"),
                    "numpy-in-forward"),
    ".item()": (("jit_trace", "frozen-constant", "Tensor.item", "peak = x.abs().max().item()"), "scalar-leaves-graph"),
    ".tolist()": (("compile_fullgraph", "graph-break", "Tensor.tolist", "sizes = lengths.tolist()"),
                  "scalar-leaves-graph"),
    "data-dependent if": (("compile_fullgraph", "graph-break", "if", "if x.sum() > 0:"), "data-dependent-if"),
    "autograd.Function under jit.script": (("jit_script", "unsupported-python", "torch.autograd.Function"),
                                           "autograd-function-script"),
    "dict outputs under jit.trace": (("jit_trace", "container-output", "dict"), "dict-output-trace"),
    "in-place ops": (("onnx_export", "unsupported-op", "aten.index_put_"), "in-place"),
}


def finding(stage, kind, op, code=None):
    return Finding(stage=stage, kind=kind, op=op, code=code, message="m")


def all_expected_findings():
    """The example models' expected findings, with the source line each points at."""
    found = []
    for stem in MODELS_WITH_FINDINGS:
        lines = (MODELS / f"{stem}.py").read_text().splitlines()
        found += [finding(stage, kind, op, lines[line - 1].strip() if line else None)
                  for stage, kind, op, line in expected_findings(stem)]
    return found


def write(tmp_path, text, name="rewrites.yaml"):
    path = tmp_path / name
    path.write_text(textwrap.dedent(text))
    return path


def test_builtin_catalog_loads_with_unique_ids():
    entries = load(None).entries
    assert len(entries) >= 20
    assert len({e.id for e in entries}) == len(entries)
    assert all(e.rewrite.strip() and e.why.strip() and e.breaks for e in entries)


@pytest.mark.parametrize("what", REQUIRED, ids=list(REQUIRED))
def test_catalog_covers_the_required_ops(what):
    found, entry_id = REQUIRED[what]
    entry = load(None).match(finding(*found))
    assert entry is not None and entry.id == entry_id, f"{what}: got {entry and entry.id}"


def test_every_entry_has_a_triggering_model_or_says_it_passes_today():
    examples = all_expected_findings()
    for entry in load(None).entries:
        triggered = [f for f in examples if entry.matches(f)]
        if triggered:
            named = [word for word in entry.status.split() if word.startswith("models/")]
            assert named and all((MODELS.parent / n.rstrip(")").rstrip(",")).exists() for n in named), entry.id
        else:
            assert "passes every stage" in (entry.status or ""), f"{entry.id}: no model triggers it, no note why"


def test_entries_that_pass_today_name_models_whose_expected_verdicts_all_pass():
    for entry in load(None).entries:
        if "passes every stage" not in (entry.status or ""):
            continue
        for word in entry.status.split():
            if word.strip("()").startswith("models/"):
                verdicts = literal(MODELS.parent / word.strip("()"), "EXPECTED")
                assert set(verdicts.values()) == {"pass"}, f"{entry.id}: {word} does not pass every stage"


def test_rewrite_is_attached_for_entries_that_pass_today_when_their_finding_occurs():
    catalog = load(None)
    for entry in catalog.entries:
        if "passes every stage" in (entry.status or ""):
            one = finding(entry.breaks[0], (entry.kinds or ["unsupported-op"])[0], entry.ops[0])
            catalog.attach([one])
            assert one.rewrite == entry.text(), entry.id


def test_a_finding_keeps_a_rewrite_it_already_has_and_unmatched_findings_get_none():
    catalog = load(None)
    own = Finding(stage="onnx_export", kind="unsupported-op", op="aten.mode", message="m", rewrite="mine")
    other = finding("onnx_export", "unsupported-op", "aten.nothing_like_it")
    wrong_stage = finding("jit_script", "unsupported-op", "aten.mode")
    catalog.attach([own, other, wrong_stage])
    assert (own.rewrite, other.rewrite, wrong_stage.rewrite) == ("mine", None, None)


def test_op_matches_its_overloads_but_not_other_ops_with_the_same_prefix():
    entry = next(e for e in load(None).entries if e.id == "median-dim")
    assert entry.matches(finding("onnx_export", "unsupported-op", "aten.median.dim"))
    assert not entry.matches(finding("onnx_export", "unsupported-op", "aten.median_filter"))


def test_caveat_goes_into_the_rewrite_as_a_comment():
    entry = next(e for e in load(None).entries if e.caveat)
    assert entry.text().endswith(f"# Caveat: {entry.caveat.strip()}")


def test_user_file_comes_first_and_replaces_a_builtin_entry_of_the_same_id(tmp_path):
    path = write(tmp_path, """\
        - id: mode
          title: our mode
          ops: [aten.mode]
          breaks: [onnx_export]
          why: we have our own
          rewrite: mode = our_mode(x)
        - id: our-sort
          title: sort
          ops: [aten.sort]
          breaks: [onnxruntime]
          why: our runtime has no Sort
          rewrite: values = our_sort(x)
        """)
    catalog = load(str(path))
    assert [e.id for e in catalog.entries[:2]] == ["mode", "our-sort"]
    assert [e.id for e in catalog.entries].count("mode") == 1
    assert catalog.match(finding("onnx_export", "unsupported-op", "aten.mode")).rewrite == "mode = our_mode(x)"
    assert catalog.match(finding("onnxruntime", "missing-kernel", "aten.sort.default")).id == "our-sort"
    assert catalog.match(finding("onnx_export", "unsupported-op", "aten.cdist")).id == "cdist"


@pytest.mark.parametrize("text, complaint", [
    ("- id: x\n  title: t\n  ops: [a]\n  breaks: [tensorrt]\n  why: w\n  rewrite: r\n", "unknown stage(s) tensorrt"),
    ("- id: x\n  title: t\n  ops: [a]\n  breaks: [jit_trace]\n  why: w\n", "rewrite: Field required"),
    ("- id: x\n  title: t\n  breaks: [jit_trace]\n  why: w\n  rewrite: r\n", "needs ops or kinds"),
    ("- id: x\n  title: t\n  ops: [a]\n  breaks: [jit_trace]\n  why: w\n  rewrite: r\n  fix: f\n", "fix: Extra inputs"),
    ("id: x\n", "must be a YAML list"),
    ("- id: [\n", "not valid YAML"),
])
def test_a_bad_user_file_is_a_usage_error_naming_file_and_entry(tmp_path, text, complaint):
    path = write(tmp_path, text)
    with pytest.raises(UsageError) as raised:
        parse(path)
    assert str(path) in str(raised.value) and complaint in str(raised.value)


def test_duplicate_ids_in_one_file_are_refused(tmp_path):
    entry = "- id: x\n  title: t\n  ops: [a]\n  breaks: [jit_trace]\n  why: w\n  rewrite: r\n"
    with pytest.raises(UsageError, match="duplicate id"):
        parse(write(tmp_path, entry + entry))


def test_run_refuses_a_bad_rewrites_file_before_starting(tmp_path):
    bad = write(tmp_path, "- id: x\n  title: t\n  ops: [a]\n  breaks: [nowhere]\n  why: w\n  rewrite: r\n")
    proc = run_cli("run", str(MODELS / "dict_outputs.py"), "--rewrites", str(bad), "--json", str(tmp_path / "r.json"))
    assert proc.returncode == 2
    assert "unknown stage(s) nowhere" in proc.stderr and not (tmp_path / "r.json").exists()


def test_run_attaches_the_rewrite_from_the_user_file(tmp_path):
    path = write(tmp_path, """\
        - id: dict-output-trace
          title: dicts
          ops: [dict]
          kinds: [container-output]
          breaks: [jit_trace]
          why: our convention
          rewrite: "return Output(**heads)  # our NamedTuple"
        """)
    out = tmp_path / "report.json"
    proc = run_cli("run", str(MODELS / "dict_outputs.py"), "--stages", "jit_trace", "--rewrites", str(path),
                   "--json", str(out), "--quiet", env={"COMPATCHECK_CACHE_DIR": str(tmp_path / "cache")})
    report = json.loads(out.read_text())
    rewrites = [f["rewrite"] for f in report["findings"] if f["op"] == "dict"]
    assert rewrites == ["return Output(**heads)  # our NamedTuple"], proc.stdout
    assert report["options"]["rewrites"] == str(path.resolve())


def test_the_catalog_rewrite_goes_where_it_fits_the_line_and_library_advice_where_the_cause_is_library_code():
    catalog = load(None)
    mine = Finding(stage="jit_trace", kind="frozen-constant", op="Tensor.item", file="m.py", line=4,
                   code="peak = x.abs().max().item()", message="...")
    theirs = Finding(stage="jit_trace", kind="frozen-constant", op="Tensor.item", file="m.py", line=9,
                     code="return self.lm(input_ids).logits", message="...",
                     library_file="transformers/models/llama/modeling_llama.py", library_line=120,
                     library_code="n = mask.sum().item()")
    catalog.attach([mine, theirs])
    assert mine.rewrite == catalog.match(mine).text(mine) and mine.advice is None
    assert mine.rewrite.endswith("\npeak = x.abs().max()")  # made from the user's own line
    assert theirs.rewrite is None
    assert "not in yours" in theirs.advice and "report it upstream" in theirs.advice
    assert "reproduce_jit_trace.py" in theirs.advice
    assert "attn_implementation" not in theirs.advice  # no switch that does not fit this code


def test_a_miner_with_rewrites_takes_its_keywords():
    """aot_inductor asks export's miner for kind="compile-error": the wrapper passes keywords through."""
    from types import SimpleNamespace

    from compatcheck.diagnose.catalog import with_rewrites
    from compatcheck.diagnose.found import plain

    @with_rewrites
    def miner(stage, ctx, error, kind="export-error"):
        return [plain(stage, kind, str(error))]

    ctx = SimpleNamespace(options=SimpleNamespace(rewrites=None))
    assert [f.kind for f in miner("aot_inductor", ctx, "boom", kind="compile-error")] == ["compile-error"]
