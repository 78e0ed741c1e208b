"""The result cache: an unchanged run is served from it, any change to what a verdict depends on is not."""

import shutil

from tests.conftest import MODELS, run_json, verdicts

STAGES = "jit_script,onnxruntime"


def cached(report):
    return {stage["name"]: stage["cached"] for stage in report["stages"]}


def test_second_run_is_served_from_the_cache_and_a_change_is_not(tmp_path):
    model = tmp_path / "model" / "net.py"
    model.parent.mkdir()
    shutil.copy(MODELS / "where_scatter_gather.py", model)

    first_dir, second_dir = tmp_path / "a", tmp_path / "b"
    first_dir.mkdir(), second_dir.mkdir()
    _, first = run_json(first_dir, "run", str(model), "--stages", STAGES)
    assert not any(cached(first).values()) and first["workers"] == 1

    proc, second = run_json(second_dir, "run", str(model), "--stages", STAGES, "--artifacts", str(tmp_path / "art"))
    assert all(cached(second).values()) and second["workers"] == 0
    assert verdicts(second) == verdicts(first)
    assert second["stages"][1]["max_abs_error"] == first["stages"][1]["max_abs_error"]
    assert (tmp_path / "art" / "model.onnx").exists(), "cached artifacts are copied where --artifacts asks"
    assert "pass (cached)" in proc.stdout

    # Another option: a different key.
    _, other = run_json(first_dir, "run", str(model), "--stages", STAGES, "--atol", "0.5")
    assert not any(cached(other).values())

    # A changed model file: a different key, even with the same options.
    model.write_text(model.read_text() + "\n# changed\n")
    _, changed = run_json(first_dir, "run", str(model), "--stages", STAGES)
    assert not any(cached(changed).values())

    # A changed file beside the model counts too: the model may import it.
    (model.parent / "helper.py").write_text("SCALE = 2\n")
    _, beside = run_json(first_dir, "run", str(model), "--stages", STAGES)
    assert not any(cached(beside).values())

    _, bypass = run_json(first_dir, "run", str(model), "--stages", STAGES, "--no-cache")
    assert not any(cached(bypass).values()) and bypass["workers"] == 1


def test_crashes_are_never_cached(tmp_path):
    from tests.faults.test_stage_faults import HERE

    for _ in range(2):
        _, report = run_json(tmp_path, "run", str(HERE / "dies_when_traced.py"), "--stages", "jit_trace")
        assert verdicts(report)["jit_trace"] == "crash" and not report["stages"][1]["cached"]
    assert report["stages"][0]["cached"], "eager passed and is served from the cache"


def test_a_skip_that_follows_from_cached_verdicts_needs_no_worker(tmp_path):
    _, first = run_json(tmp_path, "run", str(MODELS / "data_dependent_if.py"), "--stages", "onnxruntime")
    _, second = run_json(tmp_path, "run", str(MODELS / "data_dependent_if.py"), "--stages", "onnxruntime")
    assert verdicts(first) == verdicts(second) == {"eager": "pass", "onnx_export": "fail", "onnxruntime": "skip"}
    assert second["workers"] == 0
    assert second["stages"][2]["reason"] == first["stages"][2]["reason"]
