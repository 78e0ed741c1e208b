"""compatcheck.check() and assert_deployable() on model objects, as a test suite or a script calls them."""

import importlib
import threading

import pytest
import torch
from torch import nn

import compatcheck
from tests.conftest import MODELS, ROOT, run_json, verdicts
from tests.shared_runs import expected_verdicts, stages_to_run

# One model per kind of verdict the ladder gives: a graph break, a frozen branch and a failed export
# (data_dependent_if), TorchScript failures (autograd_function) and an onnxruntime failure
# (int8_matmul). Every example model through both paths would add many minutes to the suite for no
# code path these do not take: the stages, comparison and diagnosis are shared past loading.
SAME_AS_FILE = ["data_dependent_if", "autograd_function", "int8_matmul"]


def model_object(name: str, monkeypatch):
    """The model file's parts, built the way `compatcheck run` builds them, from an importable module."""
    monkeypatch.syspath_prepend(str(MODELS))
    module = importlib.import_module(name)
    torch.manual_seed(0)
    model = module.get_model()
    torch.manual_seed(0)
    inputs = module.get_inputs()
    dynamic = module.get_dynamic_shapes() if hasattr(module, "get_dynamic_shapes") else None
    return model, inputs, dynamic, getattr(module, "TOLERANCE", None)


def findings(report: dict) -> list:
    return sorted((f["stage"], f["kind"], f["file"], f["line"], f["code"]) for f in report["findings"])


@pytest.mark.slow
@pytest.mark.parametrize("name", SAME_AS_FILE)
def test_check_on_an_object_gives_what_run_gives_on_its_file(tmp_path, monkeypatch, name):
    # aot_inductor compiles C++ for minutes and loads the model no differently than export does.
    expected = {stage: verdict for stage, verdict in stages_to_run(expected_verdicts(MODELS / f"{name}.py"), name).items()
                if stage != "aot_inductor"}
    stages = list(expected)
    proc, from_file = run_json(tmp_path, "run", str(MODELS / f"{name}.py"), "--stages", ",".join(stages),
                               "--compile-backend", "aot_eager", "--no-cache")
    model, inputs, dynamic, tolerance = model_object(name, monkeypatch)
    report = compatcheck.check(model, inputs, dynamic_shapes=dynamic, tolerance=tolerance, stages=stages,
                               compile_backend="aot_eager", cache=False)
    from_object = report.model_dump(mode="json")
    assert verdicts(from_object) == verdicts(from_file) == expected, proc.stdout
    assert findings(from_object) == findings(from_file)
    assert from_object["model"]["path"] == str(MODELS / f"{name}.py")
    assert from_object["workers"] == from_file["workers"] == 1


class Gate(nn.Module):
    def forward(self, x):
        if x.sum() > 0:
            return x * 2
        return -x


GATE_INPUTS = [(torch.ones(2, 3),), (-torch.ones(2, 3),)]


def test_assert_deployable_checks_only_the_way_to_its_target():
    # jit_trace would freeze the branch, but it is not on the way to onnxruntime: only eager,
    # onnx_export and onnxruntime run, and the export's failure is what the message shows.
    with pytest.raises(AssertionError) as failure:
        compatcheck.assert_deployable(Gate(), GATE_INPUTS, targets=["onnx"], cache=False)
    report = failure.value.report
    assert verdicts(report.model_dump(mode="json")) == {"eager": "pass", "onnx_export": "fail", "onnxruntime": "skip"}
    line = next(n for n, text in enumerate(open(__file__).read().splitlines(), 1) if "if x.sum() > 0:" in text)
    message = str(failure.value)
    assert message.startswith("not deployable to onnx:\n  onnx_export: fail")
    assert f"test_api.py:{line}: data-dependent-guard" in message and "      > if x.sum() > 0:" in message
    assert "rewrite:" in message and "  eager:" not in message, "passing stages say nothing"


def test_a_passing_target_returns_the_report_and_says_nothing():
    report = compatcheck.assert_deployable(Gate(), GATE_INPUTS[:1], targets="jit_script", cache=False)
    assert [s.name for s in report.stages] == ["eager", "jit_script"]


class Locked(nn.Module):
    def __init__(self):
        super().__init__()
        self.lock = threading.Lock()  # nothing pickles a lock

    def forward(self, x):
        return x + 1


def test_a_model_that_cannot_be_pickled_names_why_or_runs_in_process():
    with pytest.raises(compatcheck.UsageError, match=r"^cannot send the model to a worker process: pickling it "
                       r"failed with TypeError: cannot pickle '_thread.lock' object; .*isolate=False"):
        compatcheck.check(Locked(), torch.ones(2), stages=["eager"], cache=False)
    model = Locked().train()
    report = compatcheck.check(model, torch.ones(2), stages=["jit_trace"], isolate=False)
    assert verdicts(report.model_dump(mode="json")) == {"eager": "pass", "jit_trace": "pass"}
    assert report.workers == 0 and model.training, "the caller's model keeps its mode"


def test_a_class_defined_in_a_function_moves_only_with_cloudpickle():
    class Local(nn.Module):
        def forward(self, x):
            return x.relu()

    try:
        import cloudpickle  # noqa: F401
    except ImportError:
        with pytest.raises(compatcheck.UsageError, match=r"test_api\.test_a_class_defined_in_a_function_moves_only_"
                           r"with_cloudpickle\.<locals>\.Local cannot be imported there; .*pip install cloudpickle"):
            compatcheck.check(Local(), torch.ones(2), stages=["eager"], cache=False)
    else:
        report = compatcheck.check(Local(), torch.ones(2), stages=["eager"], cache=False)
        assert report.stages[0].status == "pass"


@pytest.mark.parametrize("call, message", [
    (lambda: compatcheck.check(Gate(), GATE_INPUTS, atol=-1), "atol"),
    (lambda: compatcheck.check(Gate(), GATE_INPUTS, stage=["eager"]), "unknown option 'stage'"),
    (lambda: compatcheck.check(Gate(), GATE_INPUTS, stages=["nope"]), "unknown stage 'nope'"),
    (lambda: compatcheck.check(Gate(), None), "needs its inputs"),
    (lambda: compatcheck.check(Gate(), ["x"]), "input set 1 is str"),
    (lambda: compatcheck.check(str(MODELS / "convnet.py"), GATE_INPUTS), "brings its own inputs"),
    (lambda: compatcheck.assert_deployable(Gate(), GATE_INPUTS, targets=["tensorrt"]), "unknown target 'tensorrt'"),
])
def test_bad_arguments_are_one_line_usage_errors(call, message):
    with pytest.raises(compatcheck.UsageError, match=message) as error:
        call()
    assert "\n" not in str(error.value)


def _refused_models():
    x = torch.ones(2, 3)
    return {
        "script": (lambda: torch.jit.script(Gate()), r"model is a TorchScript module .*pass the module you scripted"),
        "trace": (lambda: torch.jit.trace(Scale(), (x,)), r"model is a TorchScript module .*jit_trace stages"),
        "export": (lambda: torch.export.export(Scale(), (x,)), r"model is a torch.export ExportedProgram: pass the "
                   r"module you exported"),
        "export-module": (lambda: torch.export.export(Scale(), (x,)).module(), r"model is the module of a "
                          r"torch.export ExportedProgram \(ExportedProgram.module\(\)\)"),
        "function": (lambda: torch.relu, r"model is a builtin_function_or_method: wrap it in a torch.nn.Module"),
        "none": (lambda: None, r"model is None; "),
        "string": (lambda: "no_such_model.py", r"model file not found: no_such_model.py; "),
    }


@pytest.mark.parametrize("kind", list(_refused_models()))
def test_what_check_cannot_take_is_refused_saying_what_it_takes(kind):
    make, says = _refused_models()[kind]
    with pytest.raises(compatcheck.UsageError, match=says) as error:
        compatcheck.check(make(), torch.ones(2, 3), stages=["eager"], cache=False)
    message = str(error.value)
    assert "\n" not in message and message.endswith(compatcheck.api.TAKES)


@pytest.mark.parametrize("isolate", [True, False], ids=["isolated", "in-process"])
def test_a_torch_fx_graph_module_is_checked_as_a_module(isolate):
    traced = torch.fx.symbolic_trace(Scale())
    report = compatcheck.check(traced, [torch.ones(2, 3), torch.ones(4, 3)], stages=["jit_trace"], cache=False,
                               isolate=isolate)
    assert verdicts(report.model_dump(mode="json")) == {"eager": "pass", "jit_trace": "pass"}
    assert report.workers == (1 if isolate else 0)


def test_a_model_file_path_works_as_on_the_command_line():
    report = compatcheck.check(f"{MODELS / 'item_call.py'}:get_model", stages=["jit_trace"], cache=False)
    assert verdicts(report.model_dump(mode="json")) == {"eager": "pass", "jit_trace": "mismatch"}
    assert report.model.path == str(MODELS / "item_call.py") and report.failed


def test_the_api_example_of_the_readme_and_the_docs_runs(tmp_path):
    """The example is the same in the README and on docs/python.md; it runs as written."""
    marker = "<!-- api example -->\n```python\n"
    examples = {path.relative_to(ROOT).as_posix(): text.split(marker, 1)[1].split("```", 1)[0]
                for path in (ROOT / "README.md", ROOT / "docs" / "python.md") if marker in (text := path.read_text())}
    assert set(examples) == {"README.md", "docs/python.md"} and len(set(examples.values())) == 1, examples
    example = examples["docs/python.md"]
    assert len(example.strip().splitlines()) == 5
    namespace = {}
    exec(compile(example, "docs/python.md", "exec"), namespace)
    report = namespace["report"]
    assert verdicts(report.model_dump(mode="json")) == {"eager": "pass", "onnx_export": "pass", "onnxruntime": "pass"}


class Scale(nn.Module):
    def __init__(self):
        super().__init__()
        self.weight = nn.Parameter(torch.ones(3))

    def forward(self, x):
        return x * self.weight


def test_the_cache_serves_the_same_object_and_not_a_changed_one(tmp_path):
    model = Scale()
    first = compatcheck.check(model, torch.ones(2, 3), stages=["jit_script"], artifacts=tmp_path / "art")
    again = compatcheck.check(model, torch.ones(2, 3), stages=["jit_script"])
    assert again.workers == 0 and all(stage.cached for stage in again.stages)
    assert verdicts(again.model_dump(mode="json")) == verdicts(first.model_dump(mode="json"))
    with torch.no_grad():
        model.weight.mul_(2)  # other weights: another model, never served the old verdicts
    changed = compatcheck.check(model, torch.ones(2, 3), stages=["jit_script"])
    assert changed.workers == 1 and not any(stage.cached for stage in changed.stages)
    assert (tmp_path / "art" / "model.payload.pt").exists() and (tmp_path / "art" / "reproduce_jit_script.py").exists()


class Centre(nn.Module):
    def forward(self, x):
        return x - x.mean()


SIGNALS = [torch.randn(16), torch.randn(24)]  # 1-D: dim 0 is each signal's length, no batch


def test_batch_dim_is_check_s_keyword_for_what_a_model_file_says_with_batch_dim():
    found = compatcheck.check(Centre(), SIGNALS, stages=["eager"], cache=False, isolate=False).findings
    assert [f.kind for f in found] == ["batch-dependence"] and "say so with check()'s batch_dim" in found[0].message
    declared = compatcheck.check(Centre(), SIGNALS, batch_dim=None, stages=["eager"], cache=False)  # in the payload
    assert declared.workers == 1 and declared.findings == []
    with pytest.raises(compatcheck.UsageError, match=r"^batch_dim puts x's batch on dim 1, but x has 1 dim"):
        compatcheck.check(Centre(), SIGNALS, batch_dim=1, stages=["eager"])
