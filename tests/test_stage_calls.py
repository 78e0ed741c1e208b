"""The call a stage makes is one value (compatcheck/stage_call.py): the run, the recipe's rewrite and the
reproducer are that value, and every field of it comes from a cache-key option or from the model and its
inputs (which the cache key hashes), so a cached verdict is always about the call it shows."""

import subprocess
import sys

from compatcheck import stages
from compatcheck.ladder import LADDER
from compatcheck.options import OPTIONS, RunOptions
from compatcheck.spec import load
from compatcheck.stage_call import StageCall
from compatcheck.stages.base import StageContext, bound
from compatcheck.stages.export import STRICT
from compatcheck.stages.jit_trace import UNCHECKED
from compatcheck.stages.onnx_export import AUTO, LEGACY, NOT_OPTIMIZED, PROGRAM
from compatcheck.stages.openvino import PRECISION
from tests.conftest import ROOT, run_json

MIXED = '''
import torch

class Scaled(torch.nn.Module):
    def forward(self, x, scale=None):
        return x * (2.0 if scale is None else scale)

def get_model():
    return Scaled()

def get_inputs():
    from compatcheck import Call
    return [Call(torch.randn(2, 3), scale=torch.tensor(3.0)), Call(torch.randn(4, 3), scale=torch.tensor(1.5))]
'''
RECIPES = {"export": [STRICT], "jit_trace": [UNCHECKED], "onnx_export": [AUTO, LEGACY, NOT_OPTIMIZED, PROGRAM],
           "openvino": list(PRECISION)}
# What the model and its inputs give a call: the cache key hashes both. The files are where it writes.
FROM_THE_MODEL = {"model", "args", "kwargs", "keywords", "dynamic_shapes"}
FILES = {"path", "auto_dynamic_shapes"}
KEY_OPTIONS = {option.name for option in OPTIONS if option.cache_key}
# The worker's options that are not in the cache key, each set to a value other than its default.
OFF_KEY = {"stages": ["eager", "onnx_export"], "timeout": 7.0, "bench": True, "bench_seconds": 0.5}


def calls(tmp_path, options: dict) -> dict[tuple[str, str], StageCall]:
    """Every stage's call, plain and with each recipe it offers, under `options`."""
    path = tmp_path / "mixed.py"
    path.write_text(MIXED)
    ctx = StageContext(load(path), RunOptions(**options), tmp_path, {}, {})
    found = {}
    for step in LADDER:
        stage = stages.load(step.name)
        for recipe in [None, *RECIPES.get(step.name, [])]:
            ctx.recipe = recipe
            call = stage.call(ctx)
            if call is not None:
                found[(step.name, recipe.what if recipe else "plain")] = call
    ctx.recipe = None
    assert set(bound(ctx)) == FROM_THE_MODEL
    return found


# Each option that shapes a call, with a value other than its default.
SHAPING = {"onnx_opset": 20, "compile_backend": "aot_eager", "onnx_exporter": "legacy"}


def test_every_field_of_a_call_is_a_cache_key_option_or_the_model_and_its_inputs(tmp_path):
    assert set(RunOptions.model_fields) - KEY_OPTIONS == set(OFF_KEY)
    plain = calls(tmp_path, {})
    assert {name for name, _ in plain} == {"compile", "compile_fullgraph", "export", "jit_script", "jit_trace",
                                           "onnx_export", "openvino"}
    named = set()
    for key, call in plain.items():
        assert set(call.reads()) <= FROM_THE_MODEL | FILES | {"program"}, key
        assert set(call.shaped_by().values()) <= KEY_OPTIONS, key
        named |= set(call.shaped_by().values())
    assert named == {"onnx_exporter", "compile_backend"}  # --onnx-opset is left out where unset: the default
    sources = {key: call.source() for key, call in plain.items()}
    # Options outside the key change no call: a cached verdict is about the call it shows...
    assert {key: call.source() for key, call in calls(tmp_path, OFF_KEY).items()} == sources
    # ...and each option in it that shapes a call changes exactly the calls that say they read it.
    for option, value in SHAPING.items():
        changed = {key: call for key, call in calls(tmp_path, {option: value}).items()
                   if call.source() != sources.get(key)}
        assert changed and all(option in call.shaped_by().values() for call in changed.values()), option
    assert "opset_version=20" in calls(tmp_path, {"onnx_opset": 20})[("onnx_export", AUTO.what)].source()
    assert "strict=True" in plain[("export", STRICT.what)].source()
    assert "example_kwarg_inputs=keywords" in sources[("jit_trace", "plain")]


def test_a_call_runs_what_it_shows(tmp_path):
    """The call's own run: jit_trace of a mixed call traces the keywords, as the source says."""
    path = tmp_path / "mixed.py"
    path.write_text(MIXED)
    ctx = StageContext(load(path), RunOptions(), tmp_path, {}, {})
    stage = stages.load("jit_trace")
    traced = stage.run_call(ctx)
    assert stage.call_ran == stage.call(ctx)
    sample = ctx.sample
    assert traced(**bound(ctx)["keywords"]).equal(ctx.spec.model(*sample.args, **sample.kwargs))


def reproducers_reach_their_verdicts(report: dict, folder) -> dict[str, str]:
    """Each stage's call as the report shows it, checked to be in its reproducer, which is run."""
    shown = {}
    for stage in report["stages"]:
        script = folder / f"reproduce_{stage['name']}.py"
        if not stage.get("call"):
            continue
        assert stage["call"] in script.read_text().replace("\n        ", "\n"), stage["name"]
        done = subprocess.run([sys.executable, str(script)], capture_output=True, text=True, timeout=300)
        assert done.returncode == 0, (stage["name"], done.stdout, done.stderr)
        shown[stage["name"]] = stage["call"]
    return shown


def test_the_recipe_the_run_and_the_reproducer_carry_the_opset(tmp_path):
    """The issue's command: the onnx_export recipe offered after the plain call fails keeps --onnx-opset."""
    _, report = run_json(tmp_path, "run", str(ROOT / "tests/models/size_oblivious_guard.py"), "--stages",
                         "eager,export,jit_trace,onnx_export,onnxruntime", "--onnx-opset", "20", "--no-cache",
                         "--artifacts", str(tmp_path / "art"))
    onnx = next(stage for stage in report["stages"] if stage["name"] == "onnx_export")
    assert onnx["status"] == "fail"
    recipe = next(f for f in onnx["findings"] if f["kind"] == "passes-with")
    assert recipe["rewrite"].splitlines()[-1].endswith("dynamo=True, opset_version=20)"), recipe["rewrite"]
    assert recipe["rewrite"].startswith("program = torch.export.export(model, args, kwargs")
    shown = reproducers_reach_their_verdicts(report, tmp_path / "art")
    assert shown["onnx_export"].endswith("opset_version=20)")
    assert set(shown) == {"export", "jit_trace", "onnx_export"}


def test_the_legacy_exporter_and_a_dtype_reach_the_reproducer(tmp_path):
    dtype = "bfloat16"
    _, report = run_json(tmp_path, "run", str(ROOT / "models/convnet.py"), "--stages",
                         "eager,export,jit_trace,onnx_export", "--onnx-exporter", "legacy", "--dtype", dtype,
                         "--no-cache", "--artifacts", str(tmp_path / "art"))
    shown = reproducers_reach_their_verdicts(report, tmp_path / "art")
    assert "dynamo=False" in shown["onnx_export"] and "path" in shown["onnx_export"]
    assert report["options"]["dtype"] == dtype and f"'dtype': '{dtype}'" in (tmp_path / "art/reproduce_export.py").read_text()
