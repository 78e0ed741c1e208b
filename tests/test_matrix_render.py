"""The merged reports from real `compatcheck run` reports, the `merge` command, and the GitHub matrix."""

import json
import xml.etree.ElementTree as ET

import pytest

from compatcheck.matrix import baseline as expected
from compatcheck.matrix.baseline import Baseline, gate
from compatcheck.matrix.cells import CellResult
from compatcheck.matrix.render import Grid, junit, markdown, to_json
from compatcheck.report.model import Report, Status
from tests.conftest import MODELS, run_cli


@pytest.fixture(scope="module")
def reports(tmp_path_factory):
    """Real reports: item_call's trace freezes a .item(); data_dependent_if's export fails."""
    found = {}
    for model, stages in (("item_call", "jit_trace"), ("data_dependent_if", "jit_trace,onnxruntime")):
        out = tmp_path_factory.mktemp(model) / "report.json"
        run_cli("run", str(MODELS / f"{model}.py"), "--stages", stages, "--json", str(out), "--quiet")
        found[model] = Report.model_validate_json(out.read_text())
    return found


def cells(reports) -> list[CellResult]:
    """Two environments from real reports; on the second, data_dependent_if's trace passed."""
    fixed = reports["data_dependent_if"].model_copy(deep=True)
    fixed.stages[1].status, fixed.stages[1].findings = Status.PASS, []
    made = []
    for env_index, (env, data_dependent_if) in enumerate((("torch-a", reports["data_dependent_if"]),
                                                          ("torch-b", fixed))):
        for model_index, (model, report) in enumerate((("item_call", reports["item_call"]),
                                                       ("data_dependent_if", data_dependent_if))):
            made.append(CellResult(environment=env, model=model, target=f"models/{model}.py",
                                   order=(env_index, model_index), key="k", requirements=["torch==2.13.0"],
                                   report=report))
    return made


BASELINE = Baseline.model_validate({"environments": {
    "torch-a": {"versions": {"torch": "2.12.0"}, "models": {
        "item_call": {"eager": "pass", "jit_trace": "mismatch"},
        "data_dependent_if": {"eager": "pass", "jit_trace": "mismatch", "onnx_export": "fail", "onnxruntime": "skip"}}},
    "torch-b": {"versions": {"torch": "2.12.0"}, "models": {
        "item_call": {"eager": "pass", "jit_trace": "pass"},
        "data_dependent_if": {"eager": "pass", "jit_trace": "mismatch", "onnx_export": "fail", "onnxruntime": "skip"}}},
}})


def line_of(model: str, code: str) -> str:
    """'model.py:N' of the first line holding `code` in an example model."""
    lines = (MODELS / f"{model}.py").read_text().splitlines()
    return f"{model}.py:{next(n for n, line in enumerate(lines, 1) if code in line)}"


ITEM = line_of("item_call", "peak = x.abs().max().item()")
BRANCH = line_of("data_dependent_if", "if x.sum() > 0")


def grid(reports) -> Grid:
    results = cells(reports)
    return Grid(results, gate(results, BASELINE, {r.id for r in results}), BASELINE)


def test_markdown_grid_names_the_regression_its_versions_and_finding(reports):
    text = markdown(grid(reports))
    torch = reports["item_call"].environment["torch"]
    assert "**1 new failures**, 1 improved" in text
    regression = next(line for line in text.splitlines() if line.startswith("- **item_call**"))
    assert regression.startswith(f"- **item_call** · `jit_trace` on **torch-b**: pass with torch 2.12.0 (baseline), "
                                 f"now mismatch with torch {torch}: frozen-constant")
    assert f"at {ITEM}: " in regression
    assert f"| model | torch-a<br>torch {torch} | torch-b<br>torch {torch} |" in text
    assert "| item_call | ✅ ❗[^1] · · | ✅ ❗[^1]🔻 · · |" in text  # the same failure, one footnote
    assert "| data_dependent_if | ✅ ❗[^2] ❌[^3] ⏭️ | ✅ ✅🔺 ❌[^3] ⏭️ |" in text
    footnotes = {line.split(":", 1)[0]: line for line in text.splitlines() if line.startswith("[^")}
    assert footnotes["[^1]"].startswith("[^1]: `jit_trace`: frozen-constant") and ITEM in footnotes["[^1]"]
    assert footnotes["[^3]"].startswith("[^3]: `onnx_export`: ") and BRANCH in footnotes["[^3]"]
    assert "in order: `eager` · `jit_trace` · `onnx_export` · `onnxruntime`" in text
    between = next(line for line in text.splitlines() if "starts passing" in line)
    assert between.startswith(f"- **data_dependent_if** · `jit_trace` starts passing from torch-a (torch {torch}, "
                              f"mismatch) to torch-b (torch {torch}, pass): frozen-control-flow")


def test_junit_has_a_case_per_cell_and_stage_and_fails_only_regressions(reports):
    root = ET.fromstring(junit(grid(reports), strict=False))
    a, b = root.findall("testsuite")
    assert (a.get("name"), a.get("tests"), a.get("failures"), a.get("skipped")) == ("torch-a", "6", "0", "4")
    assert (b.get("tests"), b.get("failures"), b.get("skipped")) == ("6", "1", "2")
    failed = [case for case in b.iter("testcase") if case.find("failure") is not None]
    assert [(c.get("classname"), c.get("name")) for c in failed] == [("torch-b.item_call", "jit_trace")]
    failure = failed[0].find("failure")
    assert failure.get("message") == "new-failure: expected pass, got mismatch" and ITEM in failure.text
    skipped = {case.get("name"): case.find("skipped").get("message") for case in a.iter("testcase")
               if case.find("skipped") is not None}
    assert skipped["onnx_export"] == "xfail: expected fail, got fail"
    assert skipped["onnxruntime"] == "pass: expected skip, got skip"


def test_json_summary_lists_every_verdict(reports):
    data = json.loads(to_json(grid(reports), 1))
    assert data["exit_code"] == 1 and data["summary"]["new-failure"] == 1 and data["summary"]["improved"] == 1
    assert [e["name"] for e in data["environments"]] == ["torch-a", "torch-b"]
    regression = next(v for v in data["verdicts"] if v["outcome"] == "new-failure")
    assert regression["finding"]["kind"] == "frozen-constant" and regression["stage"] == "jit_trace"


def write_cells(folder, reports):
    folder.mkdir()
    for result in cells(reports):
        (folder / f"{result.environment}__{result.model}.json").write_text(result.model_dump_json())
    return sorted(str(p) for p in folder.iterdir())


def test_merge_command_gates_cell_files_from_anywhere(tmp_path, reports):
    files = write_cells(tmp_path / "cells", reports)
    expected.save(BASELINE, tmp_path / "baseline.yaml")
    proc = run_cli("merge", *files, "--baseline", str(tmp_path / "baseline.yaml"), "--out", str(tmp_path / "out"))
    assert proc.returncode == 1, proc.stderr
    assert "new-failure: torch-b/item_call jit_trace" in proc.stdout and "1 regression against" in proc.stdout
    assert "## Regressions" in (tmp_path / "out/matrix.md").read_text()
    assert ET.parse(tmp_path / "out/junit.xml").getroot().tag == "testsuites"
    proc = run_cli("merge", *files, "--out", str(tmp_path / "plain"))  # no baseline: nothing to regress from
    assert proc.returncode == 0 and "0 new-failure" in proc.stdout


def test_merge_refuses_what_is_not_a_cell_file(tmp_path, reports):
    files = write_cells(tmp_path / "cells", reports)
    report = tmp_path / "report.json"
    report.write_text(reports["item_call"].model_dump_json())
    proc = run_cli("merge", str(report), "--out", str(tmp_path / "out"))
    assert proc.returncode == 2 and "is not a cell file" in proc.stderr
    proc = run_cli("merge", files[0], files[0], "--out", str(tmp_path / "out"))
    assert proc.returncode == 2 and "two cell files for" in proc.stderr


def test_emit_github_prints_one_job_per_cell(tmp_path):
    matrix = tmp_path / "matrix.yaml"
    matrix.write_text(f"environments:\n  a: {{requirements: [torch==2.13.0]}}\n  b: {{requirements: [torch==2.14.1]}}\n"
                      f"models:\n  paths: [{MODELS / 'convnet.py'}, {MODELS / 'item_call.py'}]\n")
    proc = run_cli("matrix", str(matrix), "--emit", "github")
    assert proc.returncode == 0, proc.stderr
    include = json.loads(proc.stdout)["include"]
    assert [job["cell"] for job in include] == ["a/convnet", "a/item_call", "b/convnet", "b/item_call"]
    assert include[3] == {"cell": "b/item_call", "environment": "b", "model": "item_call",
                          "artifact": "b__item_call"}
    proc = run_cli("matrix", str(matrix), "--emit", "github", "--cell", "b/convnet")
    assert [job["cell"] for job in json.loads(proc.stdout)["include"]] == ["b/convnet"]
    proc = run_cli("matrix", str(matrix), "--emit", "gitlab")
    assert proc.returncode == 2 and "error: --emit must be github, got 'gitlab'" in proc.stderr
