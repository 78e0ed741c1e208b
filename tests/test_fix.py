"""`compatcheck fix`: the codemods on source text, then real runs: each class of rewrite proven on the
repository's models (the printed diff applies with `patch -p0` and the patched file passes what the report
says), a rewrite that moves the outputs refuted, one on a branch no input set takes not covered, two
rewrites combined, and --write refusing a link and a file changed since the run."""

import json
import os
import shutil
import subprocess
from pathlib import Path

import pytest

from compatcheck.codemods import rewrite
from compatcheck.errors import UsageError
from compatcheck.fix.text import changed_statements, combined
from compatcheck.fix.write import write_rewrite
from compatcheck.report.model import Report
from tests.conftest import MODELS, ROOT, run_cli

FIX_MODELS = ROOT / "tests" / "models" / "fix"
FAST = ("--compile-backend", "eager")  # fullgraph capture is what the rewrites change; inductor adds only time

GATE = "import torch\n\ndef f(x, y):\n    if x.sum() > 0:\n        return y * 2\n    return -y\n"
ASSIGN = "import torch\n\ndef f(x):\n    # pick\n    if x.sum() > 0:\n        h = x * 2  # twice\n    else:\n        h = -x\n    return h\n"
NUMPY = "import numpy as np\nimport torch\n\ndef f(t):\n    return torch.from_numpy(np.clip(t.detach().numpy(), -1, 1))\n"
NUMPY_NAMES = ("import numpy\nimport torch\n\ndef f(t):\n    a = t.cpu().numpy().astype(numpy.float64)\n"
               "    m = numpy.mean(a, axis=1, keepdims=True)\n    return torch.as_tensor(a - m, dtype=torch.float32)\n")
SIZES = "import torch\n\ndef f(x):\n    n = int(x.size(1)) * int(x.shape[-1])\n    return torch.zeros(int(x.size()[0]), n)\n"

CODEMODS = [
    ("if-to-where", GATE, 4, "import torch\n\ndef f(x, y):\n    return torch.where(x.sum() > 0, y * 2, -y)\n"),
    ("if-to-where", ASSIGN, 5,
     "import torch\n\ndef f(x):\n    # pick\n    h = torch.where(x.sum() > 0, x * 2, -x)\n    return h\n"),
    ("if-to-where", GATE.replace("import torch\n", "from torch import where\n"), 4, None),  # no `torch` to call
    ("if-to-where", GATE.replace("    return -y\n", "    elif x.sum() < -1:\n        return y\n    return -y\n"), 4,
     None),
    ("if-to-where", ASSIGN.replace("        h = -x\n", "        g = -x\n"), 5, None),  # two names: not one value
    ("numpy-to-torch", NUMPY, 5,
     "import numpy as np\nimport torch\n\ndef f(t):\n    return torch.clamp(t.detach(), -1, 1)\n"),
    ("numpy-to-torch", NUMPY_NAMES, 6,
     "import numpy\nimport torch\n\ndef f(t):\n    a = t.cpu().to(torch.float64)\n"
     "    m = torch.mean(a, dim=1, keepdim=True)\n    return torch.as_tensor(a - m, dtype=torch.float32)\n"),
    ("numpy-to-torch", NUMPY.replace("np.clip(", "np.percentile(").replace(", -1, 1)", ", 5)"), 5, None),
    ("size-without-int", SIZES, 4,
     "import torch\n\ndef f(x):\n    n = x.size(1) * x.shape[-1]\n    return torch.zeros(int(x.size()[0]), n)\n"),
    ("size-without-int", SIZES, 5,
     "import torch\n\ndef f(x):\n    n = int(x.size(1)) * int(x.shape[-1])\n    return torch.zeros(x.size()[0], n)\n"),
    ("size-without-int", "def f(x):\n    return int(x.sum())\n", 2, None),  # a value, not a size
]


@pytest.mark.parametrize("name, source, line, expected", CODEMODS)
def test_a_codemod_rewrites_only_the_pattern_it_knows(name, source, line, expected):
    assert rewrite(name, source, line) == expected


def test_the_statements_a_rewrite_changes_and_two_rewrites_made_into_one():
    where = rewrite("if-to-where", GATE, 4)
    assert changed_statements(GATE, where) == [4, 5, 6]
    source = GATE.replace("def f(x, y):\n", "def f(x, y):\n    n = int(x.size(1))\n")
    both = combined(source, [rewrite("if-to-where", source, 5), rewrite("size-without-int", source, 4)])
    assert both == ("import torch\n\ndef f(x, y):\n    n = x.size(1)\n    return torch.where(x.sum() > 0, y * 2, -y)\n")
    assert combined(source, [where, where.replace("y * 2", "y * 3")]) is None  # the same lines, two ways


def _fix(tmp_path: Path, model: Path, stages: str, *flags: str, mode: int = 0o644):
    """`compatcheck fix` on a copy of `model` (with `mode`) in tmp_path, run from there: (process, report, the
    copy)."""
    copy = tmp_path / model.name
    shutil.copy(model, copy)
    os.chmod(copy, mode)
    out = tmp_path / "report.json"
    proc = run_cli("fix", copy.name, "--stages", stages, "--json", str(out), "-q", *FAST, *flags, cwd=tmp_path)
    assert out.exists(), proc.stdout + proc.stderr
    return proc, json.loads(out.read_text()), copy


@pytest.mark.slow
@pytest.mark.parametrize("model, stages, codemod_entry", [
    ("models/data_dependent_if.py", "jit_trace,onnx_export,onnxruntime", "data-dependent-if"),  # docs/fix.md's
    ("models/numpy_forward.py", "eager,jit_script,jit_trace", "numpy-in-forward"),
    ("models/int_of_size.py", "eager,export,jit_trace", "dynamic-shape-int"),
], ids=["if-to-where", "numpy-to-torch", "size-without-int"])
def test_each_class_of_rewrite_is_proven_and_its_diff_applies(tmp_path, model, stages, codemod_entry):
    """Run from the repository's root, as docs/fix.md's block is; the diff is applied to a copy elsewhere."""
    out = tmp_path / "report.json"
    proc = run_cli("fix", model, "--stages", stages, "--json", str(out), "-q")
    report = json.loads(out.read_text())
    [proven] = report["rewrites"]
    assert proven["status"] == "proven" and proven["parts"][0].startswith(codemod_entry), proven
    assert proven["unblocked"] and all(report_stage["status"] != "pass" for report_stage in report["stages"]
                                       if report_stage["name"] in proven["unblocked"])
    [finding] = [f for f in report["findings"] if f["kind"] == "proven-rewrite"]
    assert finding["rewrite"] == proven["diff"] and finding["stage"] == proven["unblocked"][0]
    assert proven["diff"] in proc.stdout.replace("\r", "") or proven["diff"].splitlines()[2] in proc.stdout
    copy = tmp_path / model
    copy.parent.mkdir()
    shutil.copy(ROOT / model, copy)
    subprocess.run(["patch", "-p0", "--quiet"], input=proven["diff"], text=True, cwd=tmp_path, check=True)
    assert copy.read_text() != (ROOT / model).read_text()
    out = tmp_path / "patched.json"
    run_cli("run", model, "--stages", stages, "--json", str(out), "-q", "--no-cache", cwd=tmp_path)
    assert {s["name"]: s["status"] for s in json.loads(out.read_text())["stages"]} == proven["after"]
    if codemod_entry == "data-dependent-if":
        _the_docs_block_is_this_run(report, ("fix", model, "--stages", stages))


def _the_docs_block_is_this_run(report: dict, key: tuple[str, ...]) -> None:
    """docs/fix.md's output block shows this command, and is what this run prints."""
    from tests.test_docs import generator

    page = ROOT / "docs" / "fix.md"
    assert key in {output.key for output in generator().outputs(page.read_text())}
    stale = generator().update(page, {key: Report.model_validate(report)}, write=False)
    assert stale == [], "regenerate with `python docs/generate.py`:\n" + "\n".join(map(str, stale))


@pytest.mark.slow
def test_a_rewrite_that_moves_the_outputs_is_refuted_with_the_output_that_moved(tmp_path):
    _, report, copy = _fix(tmp_path, FIX_MODELS / "branch_shapes.py", "eager,compile_fullgraph")
    [refuted] = report["rewrites"]
    assert refuted["status"] == "refuted" and refuted["after"]["eager"] == "mismatch"
    assert refuted["why"].startswith("eager's answers moved on the rewritten copy (mismatch): input set 1, output")
    assert "shape [3, 4], expected [1, 4]" in refuted["why"]
    assert not [f for f in report["findings"] if f["kind"] == "proven-rewrite"]


@pytest.mark.slow
def test_a_rewrite_past_which_the_stage_stops_at_another_line_is_partial(tmp_path):
    """int(x.size(1)) feeds a Python loop that builds the mask: without int() export gets past that line and
    stops at the loop."""
    _, report, _ = _fix(tmp_path, MODELS / "helper_pins_dim.py", "eager,export")
    [partial] = report["rewrites"]
    assert partial["status"] == "partial", partial
    assert partial["why"].startswith("export gets past dynamic-shape on `int()` at helper_pins_dim.py:29 and stops at ")
    assert partial["after"]["export"] == "fail" and not partial["unblocked"]


@pytest.mark.slow
def test_a_rewrite_of_a_branch_no_input_set_takes_is_not_covered(tmp_path):
    _, report, _ = _fix(tmp_path, FIX_MODELS / "one_branch_taken.py", "eager,compile_fullgraph")
    [unproven] = report["rewrites"]
    assert unproven["status"] == "not-covered", unproven
    assert unproven["why"].startswith("it changes line 17, which no input set or swept size runs")
    assert unproven["after"]["compile_fullgraph"] == "pass"  # it would unblock, but nothing ran the other branch


@pytest.mark.slow
def test_proven_rewrites_are_proven_together_and_written(tmp_path):
    proc, report, copy = _fix(tmp_path, FIX_MODELS / "two_blockers.py", "eager,compile_fullgraph,jit_script",
                              "--write", mode=0o640)
    first, second, together = report["rewrites"]
    assert (first["status"], second["status"], together["status"]) == ("proven", "proven", "proven")
    assert (first["unblocked"], second["unblocked"]) == (["compile_fullgraph"], ["jit_script"])
    assert together["parts"] == first["parts"] + second["parts"]
    assert together["unblocked"] == ["compile_fullgraph", "jit_script"]
    assert f"wrote the offered rewrite into {copy.name}" in proc.stderr
    text = copy.read_text()
    assert "torch.where(x.sum() > 0" in text and "np.abs" not in text and "import numpy as np" in text
    assert copy.stat().st_mode & 0o777 == 0o640
    proc = run_cli("run", copy.name, "--stages", "eager,compile_fullgraph,jit_script", "-q", "--no-cache", *FAST,
                   cwd=tmp_path)
    assert proc.returncode == 0, proc.stdout


def test_write_refuses_a_model_reached_through_a_link(tmp_path):
    target = tmp_path / "real.py"
    shutil.copy(MODELS / "data_dependent_if.py", target)
    (tmp_path / "link.py").symlink_to(target)
    proc = run_cli("fix", "link.py", "--write", "--stages", "eager", cwd=tmp_path)
    assert proc.returncode == 2 and "link.py is reached through a link; nothing was written" in proc.stderr
    assert target.read_text() == (MODELS / "data_dependent_if.py").read_text()


def test_write_refuses_a_file_changed_since_the_run(tmp_path):
    model = tmp_path / "model.py"
    model.write_text(GATE)
    read = model.read_bytes()
    model.write_text(GATE + "# edited meanwhile\n")
    with pytest.raises(UsageError, match="changed since the run read it; nothing was written"):
        write_rewrite(model, read, rewrite("if-to-where", GATE, 4))
    assert model.read_text() == GATE + "# edited meanwhile\n"


@pytest.mark.slow
def test_run_says_in_one_line_what_fix_can_rewrite(tmp_path):
    proc = run_cli("run", str(MODELS / "data_dependent_if.py"), "--stages", "eager,compile_fullgraph", "-q", *FAST,
                   cwd=tmp_path)
    lines = [line for line in proc.stderr.splitlines() if line.startswith("fix: ")]
    assert lines == ["fix: `compatcheck fix` can rewrite data-dependent-if at data_dependent_if.py:31, and offers "
                     "what running every stage again on the rewrite proves"]


def test_fix_says_when_it_has_nothing_to_rewrite(tmp_path):
    proc = run_cli("fix", str(MODELS / "convnet.py"), "--stages", "eager", "-q", cwd=tmp_path)
    assert proc.returncode == 0, proc.stderr
    assert "fix: no finding on the model file's lines has a codemod that fits its code; nothing was rewritten" in \
        proc.stderr
    assert "before → after" not in proc.stdout
