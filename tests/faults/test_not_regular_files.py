"""A FIFO where a model, matrix, cell, report or catalog file belongs, and a YAML file
too large to parse in reasonable time: each is one line and exit code 2, at once. Reading a FIFO blocks
until something writes to it, so each run has a timeout that fails the test where one would."""

import os

import pytest

from tests.conftest import run_cli
from tests.faults.test_bad_input import assert_one_line_usage_error

MODEL = "import torch\n\n\ndef get_model():\n    return torch.nn.Identity()\n"


@pytest.mark.parametrize("args, says", [
    (["run", "{fifo}"], "error: model path is a FIFO, expected a .py file: {fifo}"),
    (["run", "{model}", "--rewrites", "{fifo}"], "error: cannot read rewrite catalog {fifo}: it is a FIFO, not a "
                                                 "regular file"),
    (["matrix", "{fifo}"], "error: cannot read matrix file {fifo}: it is a FIFO, not a regular file"),
    (["matrix", "{matrix}"], "error: models.paths[0]: model path is a FIFO, expected a .py file: {fifo}"),
    (["merge", "{fifo}"], "error: cannot read cell file {fifo}: it is a FIFO, not a regular file"),
    (["checklist", "{fifo}"], "error: cannot read report {fifo}: it is a FIFO, not a regular file"),
], ids=["run fifo", "rewrites fifo", "matrix fifo", "matrix's model fifo", "merge fifo", "checklist fifo"])
def test_a_file_that_is_not_a_regular_file_is_refused_at_once(tmp_path, args, says):
    paths = {"fifo": tmp_path / "pipe", "model": tmp_path / "model.py", "matrix": tmp_path / "matrix.yaml"}
    os.mkfifo(paths["fifo"])
    paths["model"].write_text(MODEL)
    paths["matrix"].write_text(f"environments:\n  here:\n    requirements: []\nmodels:\n  paths: [{paths['fifo']}]\n")
    args = [arg.format(**paths) for arg in args]
    out = ["--out", str(tmp_path / "out")] if args[0] in ("matrix", "merge") else []
    assert_one_line_usage_error(run_cli(*args, *out, timeout=30), says.format(**paths))


def test_a_yaml_file_over_the_limit_is_refused_before_it_is_parsed(tmp_path):
    path = tmp_path / "matrix.yaml"
    path.write_text("models:\n  paths:\n" + "".join(f"    - models/model_{n}_of_many.py\n" for n in range(40_000)))
    proc = run_cli("matrix", str(path), "--out", str(tmp_path / "out"), timeout=30)
    assert_one_line_usage_error(proc, f"error: cannot read matrix file {path}: it is larger than 1 MB, the limit")
