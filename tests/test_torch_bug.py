"""Torch's bug is torch's: a failure in a library's call of torch that torch alone reproduces is blamed on
torch with the reproduction, and the static build that passes is proven; a failure torch alone does not
reproduce keeps the library's advice. The library is a stand-in named einops, beside the model."""

import json
import os
import textwrap

from tests.conftest import run_cli

MODEL = textwrap.dedent("""
    import torch
    from einops.noise import jitter


    class Net(torch.nn.Module):
        def forward(self, x):
            return jitter(x) * 2


    def get_model():
        return Net()


    def get_inputs():
        return [torch.randn(2, 3), torch.randn(5, 3)]
""")


def export_findings(tmp_path, library_line: str) -> list[dict]:
    site = tmp_path / "site-packages"
    (site / "einops").mkdir(parents=True)
    (site / "einops" / "__init__.py").write_text("")
    (site / "einops" / "noise.py").write_text(
        f"import torch\n\n\ndef jitter(x):\n    {library_line}\n    return x + 0 * y\n")
    (tmp_path / "model.py").write_text(MODEL)
    out = tmp_path / "report.json"
    proc = run_cli("run", str(tmp_path / "model.py"), "--stages", "eager,export", "--no-cache", "--json", str(out),
                   "-q", env={"PYTHONPATH": os.pathsep.join([str(site), os.environ.get("PYTHONPATH", "")])})
    report = json.loads(out.read_text())
    assert [s["status"] for s in report["stages"]] == ["pass", "fail"], proc.stdout + proc.stderr
    return [f for f in report["findings"] if f["stage"] == "export"]


def test_torch_alone_failing_the_same_way_is_blamed_and_a_static_export_is_proven(tmp_path):
    error, bug, proven = export_findings(tmp_path, "y = torch.randn(x.shape, generator=None, device=x.device)")
    assert error["library_file"] == "einops/noise.py" and "Pin or upgrade" not in error["advice"]
    assert "torch's, not einops's" in error["advice"]
    assert bug["kind"] == "torch-bug" and bug["op"] == "torch.randn" and bug["library_line"] == 5
    assert "SymIntArrayRef expected to contain only concrete integers" in bug["message"]
    assert "return torch.randn(x0.shape, generator=None, device=torch.device('cpu'))" in bug["rewrite"]
    assert "dynamic_shapes=({0: torch.export.Dim.DYNAMIC},)" in bug["rewrite"]
    assert proven["kind"] == "passes-with" and "dynamic_shapes=None" in proven["rewrite"]


def test_a_failure_torch_alone_does_not_have_stays_the_librarys(tmp_path):
    error, *others = export_findings(tmp_path, "y = torch.ones(1) * int(x.abs().max() >= 0)")
    assert error["library_file"] == "einops/noise.py" and "Pin or upgrade einops" in error["advice"]
    assert not [f for f in others if f["kind"] in ("torch-bug", "passes-with")]
