"""What CI systems read: `run --junit`, `run --annotations github`, and the help a user reads."""

import traceback
from xml.etree import ElementTree

from compatcheck.errors import one_line
from compatcheck.report.ci import github_annotations, junit
from compatcheck.report.model import Finding, ModelInfo, Report, StageResult, Status
from tests.conftest import MODELS, run_cli, run_json

REWRITE = "out = torch.where(c, a, b)"


def sample_report() -> Report:
    finding = Finding(stage="onnx_export", kind="data-dependent-guard", file="gate.py", line=7, code="if x.sum() > 0:",
                      message="the code branches on a value computed from the input, 100%", rewrite=REWRITE)
    warning = Finding(stage="jit_script", kind="unsupported-python", file="gate.py", line=3, message="noted")
    stages = [
        StageResult(name="eager", status=Status.PASS),
        StageResult(name="jit_script", status=Status.PASS, findings=[warning]),
        StageResult(name="onnx_export", status=Status.FAIL, reason="export failed", findings=[finding]),
        StageResult(name="onnxruntime", status=Status.SKIP, reason="needs the artifact of onnx_export"),
        StageResult(name="triton", status=Status.CRASH, reason="the worker was killed by SIGSEGV"),
    ]
    model = ModelInfo(path=str(MODELS / "gate.py"), input_sets=1, input_shapes=[[[2]]])
    return Report(tool_version="0", created="now", model=model, stages=stages,
                  findings=[f for s in stages for f in s.findings])


def test_junit_has_one_case_per_stage_with_the_findings_in_the_failure():
    suite = ElementTree.fromstring(junit(sample_report()))
    assert (suite.get("tests"), suite.get("failures"), suite.get("skipped")) == ("5", "2", "1")
    cases = {case.get("name"): case for case in suite.iter("testcase")}
    assert list(cases) == ["eager", "jit_script", "onnx_export", "onnxruntime", "triton"]
    failure = cases["onnx_export"].find("failure")
    assert failure.get("message") == "fail: export failed" and failure.get("type") == "fail"
    assert failure.text.splitlines()[:2] == [
        "gate.py:7: data-dependent-guard: the code branches on a value computed from the input, 100%",
        "  > if x.sum() > 0:"] and REWRITE in failure.text
    assert cases["triton"].find("failure").get("message") == "crash: the worker was killed by SIGSEGV"
    assert cases["onnxruntime"].find("skipped").get("message").startswith("skip: needs the artifact")
    assert "noted" in cases["jit_script"].find("system-out").text and cases["eager"].find("*") is None


def test_github_annotations_put_errors_and_warnings_on_the_users_line(monkeypatch):
    monkeypatch.chdir(MODELS.parent)
    lines = github_annotations(sample_report())
    assert lines == [
        "::warning file=models/gate.py,line=3,title=compatcheck jit_script%3A unsupported-python::noted",
        "::error file=models/gate.py,line=7,title=compatcheck onnx_export%3A data-dependent-guard::"
        f"the code branches on a value computed from the input, 100%25%0Arewrite:%0A{REWRITE}",
        "::error title=compatcheck triton%3A crash::the worker was killed by SIGSEGV",
    ]


def test_run_writes_junit_and_prints_annotations(tmp_path):
    proc, report = run_json(tmp_path, "run", "models/item_call.py", "--stages", "jit_trace", "--junit",
                            str(tmp_path / "junit.xml"), "--annotations", "github")
    assert proc.returncode == 1
    trace = next(c for c in ElementTree.parse(tmp_path / "junit.xml").getroot().iter("testcase")
                 if c.get("name") == "jit_trace")
    assert trace.find("failure").get("type") == "mismatch"
    finding = report["findings"][0]
    assert f"::error file=models/item_call.py,line={finding['line']}," in proc.stdout


def test_bad_annotations_value_is_a_usage_error():
    proc = run_cli("run", "models/convnet.py", "--annotations", "gitlab", timeout=60)
    assert proc.returncode == 2 and proc.stderr.strip() == "error: --annotations must be github, got 'gitlab'"


def test_help_shows_no_value_for_flags_and_rejects_one():
    help_text = run_cli("run", "--help", timeout=60).stdout
    assert "<bool>" not in help_text and "--quiet" in help_text and "--junit" in help_text
    proc = run_cli("run", "models/convnet.py", "--quiet", "true", timeout=60)
    assert proc.returncode == 2 and "unexpected extra argument" in proc.stderr


def test_one_line_keeps_whole_sentences():
    explanation = ("Data-dependent branching\n  Explanation: Detected data-dependent branching (e.g. `if x.sum() > 0:`). "
                   "Dynamo does not support tracing dynamic control flow.\n  The branch condition involves a tensor "
                   "computed as follows:\n    x.sum()\n  Hint: " + "use torch.cond " * 20)
    assert one_line(RuntimeError(explanation)) == (
        "RuntimeError: Data-dependent branching Explanation: Detected data-dependent branching (e.g. `if x.sum() > 0:`)."
        " Dynamo does not support tracing dynamic control flow.")
    assert one_line(ValueError("short\nand plain")) == "ValueError: short and plain"
    assert one_line(ValueError("x" * 300)).endswith("x…") and len(one_line(ValueError("x" * 300))) == 240


def test_one_line_keeps_each_exception_of_an_embedded_traceback_and_drops_its_frames():
    """A tool that prints the exception it caught into its own message (torch.export.save does): the
    reader gets both exceptions' lines, not library paths."""
    def inner():
        raise AssertionError("op <built-in function ceil> is not in _SYM_OPS")

    try:
        try:
            inner()
        except AssertionError as exc:
            raise KeyError("ceil") from exc
    except KeyError as exc:
        printed = "".join(traceback.format_exception(exc))
    message = one_line(RuntimeError(f"Failed serializing node ceil\n Original exception {printed}"), 400)
    assert message == ("RuntimeError: Failed serializing node ceil Original exception AssertionError: op <built-in "
                       "function ceil> is not in _SYM_OPS KeyError: 'ceil'")
