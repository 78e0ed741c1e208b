"""matrix.yaml validation: a mistake is reported with its key and line, and settings merge per model."""

import subprocess
import sys
import textwrap

import pytest

from compatcheck.errors import UsageError
from compatcheck.matrix import config
from compatcheck.matrix.cells import plan
from tests.conftest import ROOT, run_cli

GOOD = """\
environments:
  torch-2.13:
    requirements: ["torch==2.13.0"]
  nightly:
    requirements: ["torch"]
    index_url: https://example.invalid/simple
    pre: true
models:
  stages: [eager, jit_trace]
  atol: 0.001
  paths:
    - models/item_call.py
    - path: models/convnet.py:get_model
      stages: [eager, onnxruntime]
      rtol: 0.01
baseline: matrix-baseline.yaml
"""


def load(tmp_path, text):
    path = tmp_path / "matrix.yaml"
    path.write_text(textwrap.dedent(text))
    return config.load(path)


def error(tmp_path, text) -> str:
    with pytest.raises(UsageError) as caught:
        load(tmp_path, text)
    return str(caught.value)


def test_a_good_matrix_loads_and_models_override_the_shared_settings(tmp_path):
    matrix = load(tmp_path, GOOD)
    assert list(matrix.environments) == ["torch-2.13", "nightly"] and matrix.environments["nightly"].pre
    plain, convnet = matrix.models.paths
    assert config.model_name(plain) == "item_call" and config.model_name(convnet) == "convnet"
    assert config.settings(matrix.models, plain).model_dump(exclude_none=True) == {
        "stages": ["eager", "jit_trace"], "atol": 0.001}
    assert config.settings(matrix.models, convnet).model_dump(exclude_none=True) == {
        "stages": ["eager", "onnxruntime"], "atol": 0.001, "rtol": 0.01}


def test_an_unknown_key_is_named_with_its_line(tmp_path):
    text = GOOD.replace("      rtol: 0.01", "      rtl: 0.01")
    assert error(tmp_path, text) == f"{tmp_path / 'matrix.yaml'}:15: models.paths[1].rtl: unknown key 'rtl'"


def test_a_bad_value_points_at_its_line(tmp_path):
    message = error(tmp_path, GOOD.replace("stages: [eager, jit_trace]", "stages: [eager, jit_trcae]"))
    assert message.startswith(f"{tmp_path / 'matrix.yaml'}:9: models.stages: unknown stage 'jit_trcae'")
    message = error(tmp_path, GOOD.replace("atol: 0.001", "atol: -1"))
    assert ":10: models.atol: must be a finite non-negative number, got -1" in message


def test_a_missing_key_points_at_its_parent(tmp_path):
    message = error(tmp_path, GOOD.replace("    - path: models/convnet.py:get_model\n", "    - name: convnet\n"))
    assert ":13: models.paths[1].path: missing key 'path'" in message


def test_every_mistake_is_reported_at_once(tmp_path):
    text = GOOD.replace("torch-2.13:\n    requirements", "torch-2.13:\n    requirement")
    text = text.replace("pre: true", "pre: maybe")
    lines = error(tmp_path, text).splitlines()
    assert [line.split(": ", 2)[1] for line in lines] == ["environments.torch-2.13.requirement",
                                                           "environments.nightly.pre"]


def test_index_options_in_requirements_are_refused(tmp_path):
    message = error(tmp_path, GOOD.replace('["torch==2.13.0"]', '["--pre", "torch"]'))
    assert ":3: environments.torch-2.13.requirements: '--pre' is not a requirement" in message


def test_environment_names_must_suit_file_names_and_models_need_distinct_names(tmp_path):
    assert "environment name 'torch 2.13'" in error(tmp_path, GOOD.replace("torch-2.13:", "torch 2.13:"))
    duplicate = GOOD.replace("models/convnet.py:get_model", "other/item_call.py")
    assert ":11: models.paths: two models are named 'item_call'; give one a `name`" in error(tmp_path, duplicate)


def test_yaml_syntax_errors_and_wrong_shapes_are_one_line(tmp_path):
    assert ":2: not valid YAML: mapping values are not allowed here" in error(tmp_path, "a: 1\nb: c: d\n")
    assert "expected a mapping" in error(tmp_path, "- just a list\n")
    assert "missing key 'environments'" in error(tmp_path, "models:\n  paths: [a.py]\n")


def test_plan_resolves_model_paths_against_the_matrix_file_and_checks_them(tmp_path):
    matrix = load(tmp_path, GOOD)
    with pytest.raises(UsageError, match=r"models.paths\[0\]: model file not found: .*models/item_call.py"):
        plan(matrix, tmp_path)
    cells = plan(matrix, ROOT)
    assert [cell.id for cell in cells] == ["torch-2.13/item_call", "torch-2.13/convnet", "nightly/item_call",
                                           "nightly/convnet"]
    assert cells[1].target == str(ROOT / "models/convnet.py") and cells[3].order == (1, 1)
    assert [cell.id for cell in plan(matrix, ROOT, ["nightly/convnet"])] == ["nightly/convnet"]
    with pytest.raises(UsageError, match="no cell 'nightly/resnet'"):
        plan(matrix, ROOT, ["nightly/resnet"])


def test_the_repository_matrix_is_valid():
    matrix = config.load(ROOT / "matrix.yaml")
    assert list(matrix.environments) == ["torch-2.10", "torch-2.13", "torch-2.14", "torch-2.15", "nightly"]
    # every supported release pinned and required; only the nightly may be unavailable
    assert [env.requirements[0] for env in matrix.environments.values()][:4] == [
        "torch==2.10.0", "torch==2.13.0", "torch==2.14.1", "torch==2.15.0"]
    assert [name for name, env in matrix.environments.items() if env.optional] == ["nightly"]
    assert matrix.environments["nightly"].pre
    assert (ROOT / matrix.baseline).is_file() and len(plan(matrix, ROOT)) == 25


def test_the_command_reports_a_bad_matrix_in_one_line_and_exits_2(tmp_path):
    (tmp_path / "matrix.yaml").write_text(GOOD.replace("baseline:", "baselin:"))
    proc = run_cli("matrix", str(tmp_path / "matrix.yaml"), "--out", str(tmp_path / "out"))
    assert proc.returncode == 2
    assert proc.stderr.strip() == f"error: {tmp_path / 'matrix.yaml'}:16: baselin: unknown key 'baselin'"


def test_the_matrix_commands_import_no_torch():
    code = ("import sys\nfrom compatcheck.matrix import run, merge\n"
            "assert not {'torch', 'numpy', 'onnx'} & set(sys.modules), 'imported a heavy package'")
    proc = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, cwd=ROOT)
    assert proc.returncode == 0, proc.stderr
