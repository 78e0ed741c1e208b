"""The Markdown checklist, from a real report: the routes, a box per finding with its line, code
and rewrite, the numbers that held, the versions; and that it renders as meant."""

import json

import pytest
from markdown_it import MarkdownIt

from compatcheck.report.markdown import checklist
from compatcheck.report.model import Finding, Report, StageResult, Status
from tests.conftest import MODELS, run_cli
from tests.test_findings import line_of

MODEL = MODELS / "data_dependent_if.py"


def render(text: str) -> str:
    return MarkdownIt("commonmark").enable("table").render(text)


@pytest.fixture(scope="module")
def written(tmp_path_factory):
    """(report dict, checklist from `run --markdown`, checklist from `compatcheck checklist`)."""
    out = tmp_path_factory.mktemp("checklist")
    proc = run_cli("run", str(MODEL), "--stages", "jit_script,jit_trace,onnx_export",
                   "--json", str(out / "report.json"), "--markdown", str(out / "run.md"), "--quiet",
                   env={"COMPATCHECK_CACHE_DIR": str(out / "cache")})
    assert (out / "report.json").exists(), proc.stdout + proc.stderr
    again = run_cli("checklist", str(out / "report.json"), "-o", str(out / "CHECKLIST.md"))
    assert again.returncode == 0, again.stderr
    return json.loads((out / "report.json").read_text()), (out / "run.md").read_text(), \
        (out / "CHECKLIST.md").read_text()


def test_checklist_command_writes_what_run_markdown_wrote(written):
    _, from_run, from_json = written
    assert from_run == from_json


def test_header_summarizes_the_routes_and_the_ladder(written):
    _, text, _ = written
    line = line_of(MODEL, "if x.sum() > 0:")
    assert "- ✅ TorchScript (script): works" in text
    assert (f"- ❌ TorchScript (trace): blocked at jit\\_trace by frozen-control-flow on `if` at "
            f"data\\_dependent\\_if.py:{line}") in text
    assert "- ⏭️ torch.compile: not checked: none of its stages ran" in text
    assert "✅ eager → ✅ jit_script → ❗ jit_trace → ❌ onnx_export" in text
    assert "## To do: 3 items in 2 blocked stages" in text


def test_each_finding_is_a_box_with_its_line_code_and_rewrite(written):
    _, text, _ = written
    line = line_of(MODEL, "if x.sum() > 0:")
    lines = text.splitlines()
    items = []
    for kind in ("frozen-control-flow", "data-dependent-guard"):
        start = next(i for i, row in enumerate(lines)
                     if row.startswith(f"- [ ] **{kind}** `if` at `data_dependent_if.py:{line}`: "))
        items.append(lines[start:start + 12])
        assert items[-1][1:4] == ["  ```python", "  if x.sum() > 0:", "  ```"]
    assert "  Rewrite:" in items[0] and "  out = torch.where(x.sum() > 0, value_if_true, value_if_false)" in items[0]
    # the same rewrite for the same line in a later stage is referred to, not repeated
    assert items[1][5] == "  Rewrite: the same as under `jit_trace` above."


def test_blocked_stages_quote_their_reason(written):
    report, text, _ = written
    reason = next(s["reason"] for s in report["stages"] if s["name"] == "onnx_export")
    line = line_of(MODEL, "if x.sum() > 0:")
    assert "### ❌ `onnx_export`: fail" in text
    assert f"> OnnxExportFailed: torch.export failed at data\\_dependent\\_if.py:{line}: " in text
    assert "data-dependent guard" in reason


def test_numerics_show_the_tolerances_that_held_and_broke(written):
    _, text, _ = written
    rows = [row for row in text.splitlines() if row.startswith("| `jit_")]
    script = next(r for r in rows if r.startswith("| `jit_script` | `output`"))
    trace = next(r for r in rows if r.startswith("| `jit_trace` | `output`"))
    assert "| 1e-05 | 0.0001 | ✅ held |" in script
    assert "| 1e-05 | 0.0001 | ❌ broken |" in trace


def test_environment_lists_the_versions_of_the_run(written):
    report, text, _ = written
    assert f"- torch: `{report['environment']['torch']}`" in text
    assert f"- onnxruntime: `{report['environment']['onnxruntime']}`" in text


def test_it_renders_as_task_items_with_code_inside_and_tables(written):
    _, text, _ = written
    html = render(text)
    assert html.count("<table>") == 2
    items = [chunk for chunk in html.split("<li>")[1:] if chunk.lstrip().startswith("<p>[ ]")]
    blocks = [item.split("</li>")[0].count('<pre><code class="language-python">') for item in items]
    # The line and the rewrite; the output that differs, at no line; the line and a reference to that rewrite.
    assert blocks == [2, 0, 1]


def test_messages_render_as_written_not_as_markup():
    finding = Finding(stage="onnx_export", kind="unsupported-op", op="aten.x", file="m.py", line=3,
                      code="y = f(x)", message="No function for <OpOverload(op='aten.x')> in __init__ | *here*")
    report = Report(tool_version="0", created="now", stages=[
        StageResult(name="onnx_export", status=Status.FAIL, reason="a | b <c>", findings=[finding])])
    html = render(checklist(report))
    assert "&lt;OpOverload(op='aten.x')&gt; in __init__ | *here*" in html
    assert "<td>a | b &lt;c&gt;</td>" in html


def test_a_blocked_stage_without_findings_still_gets_a_box():
    report = Report(tool_version="0", created="now", stages=[
        StageResult(name="eager", status=Status.PASS),
        StageResult(name="compile", status=Status.TIMEOUT, reason="ran past --timeout (600s)")])
    text = checklist(report)
    assert "- ❌ torch.compile: blocked at compile by ran past --timeout (600s)" in text
    assert "### ⏱️ `compile`: timeout" in text and "\n- [ ] find out why" in text
