"""compile_fullgraph names the raised graph break at once, from the error; the search for further
breaks runs within --diagnose-budget and the finding says when it was cut short."""

import pytest

from tests.conftest import MODELS, run_json
from tests.test_findings import line_of

SEVERAL_BREAKS = '''
import torch
from torch import nn


class Model(nn.Module):
    def forward(self, x):
        if x.sum() > 0:
            x = x * 2
        print("first break passed")
        y = torch.relu(x)
        if y.mean() > 0.5:
            y = y - 1
        return y


def get_model():
    return Model()


def get_inputs():
    return torch.ones(3, 4)
'''


@pytest.mark.slow
def test_a_tiny_budget_cuts_the_search_short_and_says_so_keeping_the_raised_break(tmp_path, write_model):
    path = write_model(SEVERAL_BREAKS)
    _, full = run_json(tmp_path, "run", str(path), "--stages", "compile_fullgraph", "--compile-backend", "eager")
    found = [(f["kind"], f["line"]) for f in full["findings"]]
    first = line_of(path, "if x.sum() > 0:")
    assert found[0] == ("graph-break", first) and len(found) >= 3, found
    assert not any("cut short" in f["message"] for f in full["findings"])

    (tmp_path / "report.json").unlink()
    _, cut = run_json(tmp_path, "run", str(path), "--stages", "compile_fullgraph", "--compile-backend", "eager",
                      "--diagnose-budget", "0.001", "--no-cache")
    findings = cut["findings"]
    assert (findings[0]["kind"], findings[0]["line"]) == ("graph-break", first)
    assert findings[0]["rewrite"]  # the catalog's rewrite for a branch on a tensor fits `if x.sum() > 0:`
    assert "cut short" in findings[0]["message"] and "--diagnose-budget 0.001" in findings[0]["message"]
    assert len(findings) < len(found)


def test_a_budget_must_be_positive(tmp_path):
    from tests.conftest import run_cli

    proc = run_cli("run", str(MODELS / "convnet.py"), "--diagnose-budget", "0")
    assert proc.returncode == 2 and "--diagnose-budget" in proc.stderr and "Traceback" not in proc.stderr
