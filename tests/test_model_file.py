"""The model-file protocol and its one-line errors (exit code 2, never a traceback)."""

from pathlib import Path

import pytest
import torch

from compatcheck.errors import UsageError
from compatcheck.spec import infer_dynamic_shapes, load
from compatcheck.target import parse_target
from tests.conftest import run_cli

GOOD_MODEL = """
import torch
def get_model():
    return torch.nn.Linear(3, 2)
"""


def test_target_with_and_without_factory():
    assert parse_target("m.py") == (Path("m.py"), "get_model")
    assert parse_target("dir/m.py:build") == (Path("dir/m.py"), "build")


def test_input_set_forms(write_model):
    path = write_model(GOOD_MODEL + """
def get_inputs():
    return [torch.ones(1, 3), (torch.ones(4, 3),), {"input": torch.ones(2, 3)}][:2]
""")
    spec = load(path)
    assert len(spec.input_sets) == 2
    assert spec.input_sets[0].args[0].shape == (1, 3) and spec.input_sets[1].args[0].shape == (4, 3)
    assert spec.dynamic_shapes_inferred and not spec.model.training


def test_kwargs_input_sets_give_dict_dynamic_shapes(write_model):
    path = write_model(GOOD_MODEL + """
def get_inputs():
    return [{"input": torch.ones(2, 3)}, {"input": torch.ones(5, 3)}]
""")
    spec = load(path)
    assert list(spec.dynamic_shapes) == ["input"] and list(spec.dynamic_shapes["input"]) == [0]


def test_same_shapes_need_no_dynamic_dims():
    from compatcheck.spec import InputSet

    assert infer_dynamic_shapes([InputSet(args=(torch.ones(2, 3),)), InputSet(args=(torch.zeros(2, 3),))]) is None
    shapes = infer_dynamic_shapes([InputSet(args=(torch.ones(2, 3), torch.ones(4))),
                                   InputSet(args=(torch.ones(2, 7), torch.ones(4)))])
    assert list(shapes[0]) == [1] and shapes[1] is None


BAD = [
    ("import torch\ndef get_model(:\n", r"syntax error in model\.py:2"),
    ("import torch\nraise ValueError('nope')\n", r"importing model\.py raised ValueError: nope at model\.py:2"),
    ("import torch\ndef get_inputs():\n    return torch.ones(1)\n", r"model\.py defines no function get_model\(\)"),
    (GOOD_MODEL, r"defines no function get_inputs\(\)"),
    ("import torch\ndef get_model():\n    raise RuntimeError('broken')\ndef get_inputs():\n    return torch.ones(1)\n",
     r"get_model\(\) raised RuntimeError: broken at model\.py:3"),
    ("import torch\ndef get_model():\n    return 42\ndef get_inputs():\n    return torch.ones(1)\n",
     r"get_model\(\) returned int; expected a torch.nn.Module"),
    (GOOD_MODEL + "def get_inputs():\n    return None\n", r"get_inputs\(\) returned None"),
    (GOOD_MODEL + "def get_inputs():\n    return []\n", r"returned an empty list"),
    (GOOD_MODEL + "def get_inputs():\n    return ('a',)\n", r"input set 1 holds no tensors"),
    (GOOD_MODEL + "def get_inputs():\n    return (torch.ones(2), {1, 2})\n",
     r"input set 1, input args\[1\] is set; an input is a tensor, or a constant argument"),
    (GOOD_MODEL + "def get_inputs():\n    return [torch.ones(2, 3), (torch.ones(2, 3), torch.ones(1))]\n",
     r"input set 2 has 2 inputs \(args\[0\], args\[1\]\), input set 1 has 1 input \(args\[0\]\)"),
    (GOOD_MODEL + "def get_inputs():\n    return [torch.ones(2, 3), torch.ones(2, 3, 1)]\n",
     r"input set 2: input 0 has 3 dimensions, input set 1 has 2"),
    (GOOD_MODEL + "TOLERANCE = {'atol': -1}\ndef get_inputs():\n    return torch.ones(2, 3)\n",
     r"TOLERANCE\['atol'\] must be a finite non-negative number"),
    (GOOD_MODEL + "TOLERANCE = {'atol': 'x'}\ndef get_inputs():\n    return torch.ones(2, 3)\n",
     r"must be a finite non-negative number, got 'x'"),
]


@pytest.mark.parametrize("source, message", BAD, ids=[m for _, m in BAD])
def test_bad_model_files_name_what_is_wrong(write_model, source, message):
    with pytest.raises(UsageError, match=message):
        load(write_model(source))


def test_missing_factory_named_after_colon(write_model):
    path = write_model(GOOD_MODEL + "def get_inputs():\n    return torch.ones(2, 3)\n")
    with pytest.raises(UsageError, match=r"defines no function build\(\)"):
        load(path, "build")


@pytest.mark.parametrize("args, message", [
    (["run", "does/not/exist.py"], "error: model file not found: does/not/exist.py"),
    (["run", "models"], "error: model path is a directory"),
    (["run", "models/convnet.py", "--stages", "eager,nope"], "error: unknown stage 'nope'"),
    (["run", "models/convnet.py", "--timeout", "0"], "error: --timeout: must be a number of seconds above 0"),
    (["run", "models/convnet.py", "--atol", "-1"], "error: --atol: must be a finite non-negative number, got -1"),
    (["run", "models/convnet.py", "--json", "/nonexistent-dir/r.json"], "error: cannot write --json"),
    (["run", "models/convnet.py", "--onnx-exporter", "magic"], "error: --onnx-exporter"),
])
def test_cli_usage_errors_are_one_line_exit_2(args, message):
    proc = run_cli(*args, timeout=60)
    assert proc.returncode == 2
    assert proc.stderr.strip().startswith(message), proc.stderr
    assert len(proc.stderr.strip().splitlines()) == 1 and "Traceback" not in proc.stderr


def test_cli_model_error_from_the_worker_is_one_line(write_model):
    path = write_model("import torch\ndef get_model():\n    return torch.nn.Identity()\ndef get_inputs():\n    return 3\n")
    proc = run_cli("run", str(path), "--stages", "eager", timeout=120)
    assert proc.returncode == 2
    assert proc.stderr.strip() == "error: get_inputs(): input set 1 is int; expected a tensor, a tuple, a dict or a compatcheck.Call"
