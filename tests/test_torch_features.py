"""The version checks: a feature this torch lacks is a skip naming the release that has it."""

import sys

import torch

from compatcheck import torch_features
from compatcheck.diagnose.broken_env import fault
from compatcheck.torch_features import Feature
from tests.conftest import MODELS


def test_a_stage_whose_feature_this_torch_lacks_is_skipped_with_the_release_that_has_it(tmp_path):
    from compatcheck.options import parse
    from compatcheck.spec import load
    from compatcheck.stages.base import StageContext
    from compatcheck.stages.jit_script import JitScript
    from compatcheck.worker.harness import run_stage

    ctx = StageContext(load(MODELS / "convnet.py"), parse({}).run_options(), tmp_path, {}, {"eager": "pass"})
    stage = JitScript()
    assert run_stage(stage, ctx).status.value == "pass"  # this torch has torch.jit.script
    stage.needs = lambda ctx: (Feature("torch.jit.script", "99.0", lambda: False),)
    result = run_stage(stage, ctx)
    assert (result.status.value, result.reason) == (
        "skip", f"needs torch ≥ 99.0 with torch.jit.script; this is torch {torch.__version__}")


def test_a_missing_feature_is_a_reason_naming_the_release_that_has_it():
    absent = Feature("torch.export.Dim.SOMETHING_NEW", "9.1", lambda: hasattr(torch.export.Dim, "SOMETHING_NEW"))
    assert torch_features.missing(absent) == (f"needs torch ≥ 9.1 with torch.export.Dim.SOMETHING_NEW; "
                                        f"this is torch {torch.__version__}")
    moved = Feature("torch.onnx.gone", "9.1", lambda: torch.onnx.gone)  # raises AttributeError: not there
    assert torch_features.missing(moved).startswith("needs torch ≥ 9.1")


def test_a_dynamic_dimension_is_spelled_as_this_torch_spells_it():
    assert torch_features.dynamic_dim("input0_dim0") is torch.export.Dim.DYNAMIC


def test_the_graph_break_type_is_read_from_either_spelling():
    class Typed(Exception):
        gb_type = "Data-dependent branching"

    assert torch_features.graph_break_type(Typed("whatever")) == "Data-dependent branching"
    old = Exception("Data-dependent branching\n  Explanation: Detected data-dependent branching")  # torch 2.10
    assert torch_features.graph_break_type(old) == "Data-dependent branching"
    assert torch_features.graph_break_type(Exception("generic_jump TensorVariable()")) is None


def test_a_failed_import_inside_torch_is_a_broken_environment_and_one_in_user_code_is_not(monkeypatch):
    # cpp_extension imports setuptools when it loads: block it as an environment without it would
    monkeypatch.delitem(sys.modules, "torch.utils.cpp_extension", raising=False)
    monkeypatch.setitem(sys.modules, "setuptools", None)
    try:
        import torch.utils.cpp_extension  # noqa: F401
    except ImportError as exc:
        inside = exc
    wrapped = RuntimeError("InductorError: ModuleNotFoundError: No module named 'setuptools'")
    wrapped.inner_exception = inside  # as inductor wraps it
    assert fault(wrapped) == ("torch needs the module 'setuptools', which this environment lacks",
                              "pip install setuptools")
    try:
        import setuptools  # noqa: F401  (the user's own import)
    except ImportError as exc:
        assert fault(exc) is None
    assert fault(ValueError("no")) is None and fault(None) is None
