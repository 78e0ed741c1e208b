"""The verdict: one pure function of the evidence (report/verdict.py), the only code that gives a stage
its status and reason; and the phases around it, whose budgets can never take a verdict reached."""

import ast
import json
import shutil
import time
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path

import pytest
import torch

import compatcheck
from compatcheck.report.model import InputSetResult, LeafComparison, PhaseRecord, Status
from compatcheck.report.verdict import RULES, Evidence, judge
from compatcheck.worker.phases import Phase
from tests.conftest import ROOT, run_cli

PACKAGE = ROOT / "compatcheck"
PHASE_MODELS = ROOT / "tests" / "models" / "phases"
VERDICT = Path("report") / "verdict.py"
# Attributes named status or reason that are not a stage's: a route's status, a server error's reason.
NOT_A_STAGE = {(Path("report") / "routes.py", "route"), (Path("triton") / "errors.py", "self")}
WORDS = {"status", "reason"}


def _owner(node: ast.Attribute) -> str:
    return node.value.id if isinstance(node.value, ast.Name) else ast.unparse(node.value)


def _targets(node: ast.AST) -> list[ast.AST]:
    if isinstance(node, ast.Assign):
        found = list(node.targets)
    elif isinstance(node, (ast.AugAssign, ast.AnnAssign)):
        found = [node.target]
    else:
        return []
    flat = []
    while found:
        target = found.pop()
        found.extend(target.elts) if isinstance(target, (ast.Tuple, ast.List)) else flat.append(target)
    return flat


def _call_writes(node: ast.Call) -> bool:
    """StageResult(status=...), x.model_copy(update={"status": ...}), setattr(x, "status", ...)."""
    name = node.func.attr if isinstance(node.func, ast.Attribute) else getattr(node.func, "id", "")
    if name in ("StageResult", "model_construct") and any(kw.arg in WORDS for kw in node.keywords):
        return True
    if name == "model_copy":
        return any(isinstance(key, ast.Constant) and key.value in WORDS
                   for kw in node.keywords if isinstance(kw.value, ast.Dict) for key in kw.value.keys)
    return name == "setattr" and len(node.args) > 1 and isinstance(node.args[1], ast.Constant) and \
        node.args[1].value in WORDS


def verdict_writes(package: Path) -> list[str]:
    """Every place outside report/verdict.py that sets a status or a reason, as 'file:line'."""
    found = []
    for path in sorted(package.rglob("*.py")):
        relative = path.relative_to(package)
        if relative == VERDICT:
            continue
        for node in ast.walk(ast.parse(path.read_text(), str(path))):
            wrote = any(isinstance(target, ast.Attribute) and target.attr in WORDS and
                        (relative, _owner(target)) not in NOT_A_STAGE for target in _targets(node))
            if wrote or (isinstance(node, ast.Call) and _call_writes(node)):
                found.append(f"{relative}:{node.lineno}")
    return found


def test_only_the_verdict_sets_a_status_or_a_reason():
    assert verdict_writes(PACKAGE) == []


@pytest.mark.parametrize("planted", [
    "def planted(result):\n    result.status = 'pass'\n",
    "def planted(result):\n    result.reason, result.seconds = 'fine', 0\n",
    "def planted(result):\n    return result.model_copy(update={'status': 'pass'})\n",
    "def planted():\n    return StageResult(name='eager', status='pass')\n",
    "def planted(result):\n    setattr(result, 'reason', 'fine')\n",
])
def test_the_syntax_tree_check_finds_a_planted_assignment(tmp_path, planted):
    copy = tmp_path / "compatcheck"
    shutil.copytree(PACKAGE, copy, ignore=shutil.ignore_patterns("__pycache__"))
    harness = copy / "worker" / "harness.py"
    lines = len(harness.read_text().splitlines())
    harness.write_text(harness.read_text() + "\n\n" + planted)
    [found] = verdict_writes(copy)
    where, line = found.split(":")
    assert where == "worker/harness.py" and int(line) > lines


def _leaf(ok=True, **fields) -> LeafComparison:
    return LeafComparison(output="0", ok=ok, **fields)


def _set(index=0, ok=True, **fields) -> InputSetResult:
    return InputSetResult(index=index, ok=ok, **fields)


def _swept(ok=True, **fields) -> InputSetResult:
    return InputSetResult(index=-1, label="batch 7", ok=ok, **fields)


OFF = _set(ok=False, leaves=[_leaf(), _leaf(ok=False, problem="max abs diff 3 at [0, 1]")])
# For each rule, evidence it is the first to apply to (every rule before it would pass it by), and the
# status and reason it must give.
CASES = {
    "skipped": (Evidence(skipped="needs onnx", error="boom"), Status.SKIP, "needs onnx"),
    "internal error": (Evidence(internal="TypeError: planted", ended="crash", error="boom", input_sets=[_set()]),
                       Status.INTERNAL, "internal error of compatcheck: TypeError: planted"),
    "crashed": (Evidence(ended="crash", ended_why="segmentation fault on input set 1"), Status.CRASH,
                "segmentation fault on input set 1"),
    "killed": (Evidence(ended="timeout", ended_why="no result after --timeout 5s"), Status.TIMEOUT,
               "no result after --timeout 5s"),
    "broken environment": (Evidence(error="ImportError: no _C", environment="torchvision's _C; fix: reinstall"),
                           Status.BROKEN_ENV, "broken environment: torchvision's _C; fix: reinstall"),
    "build raised": (Evidence(error="RuntimeError: unsupported op", input_sets=[OFF]), Status.FAIL,
                     "RuntimeError: unsupported op"),
    "input set raised": (Evidence(input_sets=[_set(), _set(1, ok=False, error="RuntimeError: shape")]), Status.FAIL,
                         "input set 2: RuntimeError: shape"),
    "input set differs": (Evidence(input_sets=[OFF], swept=[_swept(ok=False, error="boom")]), Status.MISMATCH,
                          "input set 1, output 0: max abs diff 3 at [0, 1]"),
    "swept size raised": (Evidence(input_sets=[_set()], swept=[_swept(ok=False, error="RuntimeError: size")]),
                          Status.FAIL, "at batch 7, which your input sets lack: RuntimeError: size"),
    "swept size differs": (Evidence(input_sets=[_set()], swept=[_swept(ok=False, leaves=[_leaf(ok=False,
                                                                                              problem="off")])],
                                    load_problem="r2 changed"),
                           Status.MISMATCH, "at batch 7, which your input sets lack: output 0: off"),
    "ran out": (Evidence(input_sets=[_set()], phases=[PhaseRecord(name="load", outcome="timed-out",
                                                                  note="the load run was cut short")],
                         load_problem="r2 changed"), Status.TIMEOUT, "the load run was cut short"),
    "died running": (Evidence(input_sets=[_set()], phases=[PhaseRecord(name="sweep", outcome="crashed",
                                                                       note="the sweep ended with its worker")]),
                     Status.CRASH, "the sweep ended with its worker"),
    "changed under load": (Evidence(input_sets=[_set()], load_problem="r2's answer changed"), Status.MISMATCH,
                           "r2's answer changed"),
    "pass": (Evidence(input_sets=[_set(leaves=[_leaf(fp64_verdict="within-noise")])], within_noise=True),
             Status.PASS, "differences from eager are within fp64-adjudicated noise"),
}


def test_every_rule_has_its_case():
    assert list(CASES) == [rule.name for rule in RULES]


@pytest.mark.parametrize("name", list(CASES))
def test_each_rule_gives_its_status_and_reason(name):
    evidence, status, reason = CASES[name]
    assert next(rule.name for rule in RULES if rule.applies(evidence)) == name
    assert judge(evidence) == (status, reason)


def test_the_verdict_is_pure():
    evidence = CASES["input set differs"][0]
    before = evidence.model_dump()
    assert judge(evidence) == judge(evidence)
    assert evidence.model_dump() == before


def test_a_pass_says_its_note_and_each_later_phase_that_did_not_end():
    evidence = Evidence(input_sets=[_set()], note="fullgraph", copy_problem="deepcopy failed", phases=[
        PhaseRecord(name="build", outcome="ran"), PhaseRecord(name="diagnosis", outcome="ran"),
        PhaseRecord(name="meta", outcome="timed-out", note="the device check was cut short")])
    assert judge(evidence) == (Status.PASS, "fullgraph; the model's copy for this stage: deepcopy failed "
                                            "(the device check was cut short)")


def test_a_later_phase_that_ran_out_leaves_a_failure_as_it_was():
    failed = Evidence(error="RuntimeError: no", phases=[
        PhaseRecord(name="build", outcome="ran"),
        PhaseRecord(name="recipes", outcome="timed-out", note="the recipe search was cut short")])
    assert judge(failed) == (Status.FAIL, "RuntimeError: no (the recipe search was cut short)")


def test_the_references_sweep_cut_short_leaves_eagers_pass():
    eager = Evidence(reference=True, input_sets=[_set()],
                     phases=[PhaseRecord(name="sweep", outcome="timed-out", note="the sweep was cut short")])
    assert judge(eager)[0] is Status.PASS
    assert judge(eager.model_copy(update={"reference": False}))[0] is Status.TIMEOUT


def test_a_skip_or_a_crash_says_nothing_more():
    crashed = CASES["crashed"][0].model_copy(update={"note": "fullgraph", "copy_problem": "deepcopy failed"})
    assert judge(crashed) == (Status.CRASH, "segmentation fault on input set 1")


# Real workers: a phase after the verdict that hangs in Python code (stopped inside the worker) or
# blocks in C (only the supervisor's kill stops it) keeps the verdict and is reported as that phase's.
PHASE_RUNS = {
    "recipe_hangs_in_python": "eager,onnx_export,onnxruntime",
    "recipe_blocks_in_c": "eager,onnx_export,onnxruntime",
    "meta_never_ends": "eager,jit_trace",
    "meta_blocks_in_c": "eager,jit_trace",
}


@pytest.fixture(scope="module")
def phase_runs(tmp_path_factory):
    def one(name):
        out = tmp_path_factory.mktemp(name) / "report.json"
        proc = run_cli("run", str(PHASE_MODELS / f"{name}.py"), "--stages", PHASE_RUNS[name], "--no-cache",
                       "--diagnose-budget", "2", "--quiet", "--json", str(out),
                       env={"COMPATCHECK_CACHE_DIR": str(out.parent / "cache")}, timeout=300)
        assert out.exists(), proc.stdout + proc.stderr
        return {stage["name"]: stage for stage in json.loads(out.read_text())["stages"]}

    with ThreadPoolExecutor(len(PHASE_RUNS)) as pool:
        return dict(zip(PHASE_RUNS, pool.map(one, PHASE_RUNS)))


def _phase(stage: dict, name: str) -> dict:
    return next(phase for phase in stage["phases"] if phase["name"] == name)


@pytest.mark.parametrize("model", ["recipe_hangs_in_python", "recipe_blocks_in_c"])
def test_a_recipe_that_does_not_end_keeps_the_stages_own_failure(phase_runs, model):
    export = phase_runs[model]["onnx_export"]
    assert export["status"] == "fail"
    assert "this forward refuses to be exported" in export["reason"].split(" (")[0]
    assert any(f["kind"] == "export-error" for f in export["findings"])
    recipes = _phase(export, "recipes")
    assert recipes["outcome"] == "timed-out" and "cut short" in recipes["note"]
    assert recipes["note"] in export["reason"]
    assert phase_runs[model]["onnxruntime"]["status"] == "skip"


def test_a_recipe_blocked_in_c_is_killed_after_its_budget(phase_runs):
    recipes = _phase(phase_runs["recipe_blocks_in_c"]["onnx_export"], "recipes")
    assert "the worker was killed" in recipes["note"]
    assert recipes["budget"] <= recipes["seconds"] < recipes["budget"] + 30


@pytest.mark.parametrize("model", ["meta_never_ends", "meta_blocks_in_c"])
def test_a_device_check_that_does_not_end_keeps_eagers_pass(phase_runs, model):
    eager = phase_runs[model]["eager"]
    assert eager["status"] == "pass"
    meta = _phase(eager, "meta")
    assert meta["outcome"] == "timed-out" and "cut short" in meta["note"]
    assert eager["reason"] == f"({meta['note']})"
    assert phase_runs[model]["jit_trace"]["status"] == "pass"


class Doubles(torch.nn.Module):
    def forward(self, x):
        return x * 2


def test_a_phase_is_a_row_of_the_table(monkeypatch):
    """A phase added by a test alone: its function and its row, run in process; one that outlives its
    budget is stopped there and reported as its own, the verdict as it was."""
    from compatcheck.worker import phases

    seen = []

    def counts(run):
        seen.append((run.stage.name, len(run.evidence.input_sets)))
        return "cut-short", f"counted {len(run.evidence.input_sets)} input sets"

    def sleeps(run):
        time.sleep(30)

    added = (Phase("count", "the count", "while counting", "1 s", lambda run: 1.0, lambda run: True, counts,
                   "nothing counted"),
             Phase("sleep", "the nap", "while sleeping", "0.5 s", lambda run: 0.5,
                   lambda run: run.stage.name == "jit_trace", sleeps, "no rest"))
    monkeypatch.setattr(phases, "PHASES", (*phases.PHASES[:4], *added, *phases.PHASES[4:]))
    started = time.monotonic()
    report = compatcheck.check(Doubles(), [torch.ones(2, 3), torch.ones(4, 3)], stages=["jit_trace"],
                               isolate=False, cache=False)
    assert time.monotonic() - started < 25
    assert seen == [("eager", 2), ("jit_trace", 2)]
    trace = report.stages[1]
    records = {phase.name: phase for phase in trace.phases}
    assert list(records)[:2] == ["build", "sweep"] and "count" in records and "diagnosis" in records
    assert (records["count"].outcome, records["count"].note) == ("cut-short", "counted 2 input sets")
    assert records["sleep"].outcome == "timed-out" and records["sleep"].seconds < 5
    assert trace.status == "pass"
    assert trace.reason == f"(counted 2 input sets) ({records['sleep'].note})"
    assert "sleep" not in {phase.name for phase in report.stages[0].phases}
