"""Who the onnxruntime stage blames when no intermediate value explains its difference from eager: its
graph optimizer only where a session with every optimization off matches eager, checked by running it."""

import pytest

from tests.conftest import ROOT, run_json


@pytest.mark.slow
def test_the_optimizer_is_not_blamed_where_the_unoptimized_session_differs_too(tmp_path):
    _, report = run_json(tmp_path, "run", str(ROOT / "tests" / "models" / "adaptive_pool_dynamic.py"), "--stages",
                         "onnxruntime")
    [finding] = [f for f in report["findings"] if f["stage"] == "onnxruntime" and f["kind"] == "numeric-divergence"]
    assert ("with graph_optimization_level ORT_DISABLE_ALL it differs too, so onnxruntime's graph optimizer is not "
            "the cause") in finding["message"]
    assert finding["checked_by"] == "the session ran again with graph_optimization_level ORT_DISABLE_ALL"
    assert "try graph_optimization_level" not in finding["message"]
