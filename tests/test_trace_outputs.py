"""Structured outputs have a way through jit.trace: where the trace refuses what forward returns (a
dataclass, a list of dicts), a wrapper that returns the tensors flat is traced, its outputs rebuilt into
forward's structure and compared with eager's on every input set; only then is it offered, with the code."""

from concurrent.futures import ThreadPoolExecutor

import pytest
import torch
from torch.utils import _pytree as pytree

from tests.conftest import ROOT, run_json
from tests.test_verdict_causes import load

MODELS = {"dataclass_output": "torch.utils._pytree.register_dataclass(Result)", "list_of_dicts_output": None,
          "cache_object_output": None}  # an object pytree does not know, as a library's key/value cache
KEYWORDS = "keyword_dict_output"  # called by keywords, as transformers models are


@pytest.fixture(scope="module")
def reports(tmp_path_factory) -> dict[str, dict]:
    def run(name: str) -> tuple[str, dict]:
        return name, run_json(tmp_path_factory.mktemp(name), "run", str(ROOT / "tests" / "models" / f"{name}.py"),
                              "--stages", "eager,jit_trace", "--no-cache")[1]

    with ThreadPoolExecutor(2) as pool:
        return dict(pool.map(run, [*MODELS, KEYWORDS]))


@pytest.mark.parametrize("name", MODELS)
def test_the_flat_wrapper_is_proven_and_offered(reports, name):
    trace = next(stage for stage in reports[name]["stages"] if stage["name"] == "jit_trace")
    assert trace["status"] == "fail", "the plain call is what the verdict is about"
    proven = [f for f in trace["findings"] if f["kind"] == "passes-with" and "FlatOutputs" in f["op"]]
    assert proven and "checked on every input set" in proven[0]["message"], trace["findings"]
    code = proven[0]["rewrite"]
    assert "class FlatOutputs(torch.nn.Module):" in code and "traced = torch.jit.trace(flat, args)" in code
    assert "outputs = rebuilt(model(*args), traced(*args))" in code
    assert (MODELS[name] in code) if MODELS[name] else "register_dataclass" not in code


@pytest.mark.parametrize("name", MODELS)
def test_the_offered_code_runs_as_written_and_rebuilds_forwards_structure(reports, name):
    trace = next(stage for stage in reports[name]["stages"] if stage["name"] == "jit_trace")
    code = next(f["rewrite"] for f in trace["findings"] if f["kind"] == "passes-with")
    module = load(ROOT / "tests" / "models" / f"{name}.py")
    model, inputs = module.get_model(), module.get_inputs()
    scope = {"torch": torch, "model": model, "args": (inputs[0],), **vars(module)}
    try:
        with torch.no_grad():
            exec(code, scope)
            rebuilt = scope["rebuilt"](model(inputs[0]), scope["traced"](inputs[1]))
            expected = model(inputs[1])
        assert type(rebuilt) is type(expected) and pytree.tree_structure(rebuilt) == pytree.tree_structure(expected)
        assert [type(one) for one in pytree.tree_leaves(rebuilt)] == [type(one) for one in pytree.tree_leaves(expected)]
        tensors, want = scope["tensors_of"](rebuilt), scope["tensors_of"](expected)
        assert len(tensors) == len(want) and all(torch.allclose(a, b) for a, b in zip(tensors, want))
    finally:
        if hasattr(module, "Result"):  # registered by the code run above
            pytree._deregister_pytree_node(module.Result)


def test_keyword_samples_trace_a_wrapper_that_names_each_keyword(reports):
    """example_kwarg_inputs binds by forward's parameter names: a **kwargs wrapper has none to bind."""
    trace = next(stage for stage in reports[KEYWORDS]["stages"] if stage["name"] == "jit_trace")
    assert trace["status"] == "fail", "the plain call is what the verdict is about"
    proven = [f for f in trace["findings"] if f["kind"] == "passes-with" and "FlatOutputs" in f["op"]]
    assert proven and "checked on every input set" in proven[0]["message"], trace["findings"]
    code = proven[0]["rewrite"]
    assert "def forward(self, input_ids, attention_mask):" in code
    assert "self.model(input_ids=input_ids, attention_mask=attention_mask)" in code
    assert "traced = torch.jit.trace(flat, example_kwarg_inputs=keywords)" in code
    assert "torch.utils._pytree.register_dataclass(Hidden)" in code


def test_the_keyword_wrapper_runs_as_written_and_rebuilds_forwards_structure(reports):
    trace = next(stage for stage in reports[KEYWORDS]["stages"] if stage["name"] == "jit_trace")
    code = next(f["rewrite"] for f in trace["findings"] if f["kind"] == "passes-with")
    module = load(ROOT / "tests" / "models" / f"{KEYWORDS}.py")
    model, inputs = module.get_model(), module.get_inputs()
    scope = {"torch": torch, "model": model, "keywords": inputs[0], **vars(module)}
    try:
        with torch.no_grad():
            exec(code, scope)
            rebuilt = scope["rebuilt"](model(**inputs[0]), scope["traced"](**inputs[1]))
            expected = model(**inputs[1])
        assert type(rebuilt["hidden"]) is module.Hidden and rebuilt.keys() == expected.keys()
        assert pytree.tree_structure(rebuilt) == pytree.tree_structure(expected)
        assert all(torch.allclose(a, b) for a, b in zip(pytree.tree_leaves(rebuilt), pytree.tree_leaves(expected)))
    finally:
        pytree._deregister_pytree_node(module.Hidden)  # registered by the code run above
