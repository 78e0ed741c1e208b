"""Code of the user's own installed package (a team's wheel in site-packages) is theirs: findings point
into it. A library compatcheck knows (here a stand-in named einops) is library code unless
--user-packages names it."""

import json
import os
import textwrap

from tests.conftest import run_cli

LAYER = textwrap.dedent("""
    import torch


    class Normalize(torch.nn.Module):
        def forward(self, x):
            peak = x.abs().max().item()
            return x / peak
""")


def install(tmp_path, package: str):
    """A tiny package in a site-packages folder of its own, and a model file that builds its class."""
    site = tmp_path / "lib" / "site-packages"
    (site / package).mkdir(parents=True)
    (site / package / "__init__.py").write_text("")
    (site / package / "layers.py").write_text(LAYER)
    model = tmp_path / "project" / "model.py"
    model.parent.mkdir()
    model.write_text(textwrap.dedent(f"""
        import torch
        from {package}.layers import Normalize


        def get_model():
            return Normalize()


        def get_inputs():
            return [torch.randn(2, 5), torch.randn(4, 5) * 100]
    """))
    return site, model


def trace_finding(tmp_path, site, model, *flags):
    out = tmp_path / "report.json"
    proc = run_cli("run", str(model), "--stages", "eager,jit_trace", "--json", str(out), "-q", *flags,
                   env={"PYTHONPATH": str(site)})
    report = json.loads(out.read_text())
    assert {s["name"]: s["status"] for s in report["stages"]} == {"eager": "pass", "jit_trace": "mismatch"}, proc.stdout
    return next(f for f in report["findings"] if f["stage"] == "jit_trace")


def test_a_finding_points_into_the_users_own_installed_package(tmp_path):
    site, model = install(tmp_path, "teamnet")
    finding = trace_finding(tmp_path, site, model)
    assert finding["file"].endswith("site-packages/teamnet/layers.py") and finding["line"] == 7
    assert finding["code"] == "peak = x.abs().max().item()" and finding["library_file"] is None
    assert finding["rewrite"]  # the line is the user's to rewrite


def test_a_known_library_is_library_code_unless_marked_as_the_users(tmp_path):
    site, model = install(tmp_path, "einops")
    library = trace_finding(tmp_path, site, model)
    assert library["library_file"] == "einops/layers.py" and library["library_line"] == 7
    assert library["rewrite"] is None and "not in yours" in library["advice"]
    mine = trace_finding(tmp_path, site, model, "--user-packages", "einops")
    assert mine["file"].endswith("site-packages/einops/layers.py") and mine["line"] == 7 and mine["library_file"] is None


def test_ownership_follows_links_to_where_a_file_really_is(tmp_path):
    """A file is judged where it really lives: a linked folder or a linked file into the model's folder is
    the user's, a link from the model's folder into site-packages is not, and `..` is taken after the links."""
    from compatcheck.frames import UserCode

    site, model = install(tmp_path, "teamlib")
    (site / "torch").mkdir()
    (site / "torch" / "ops.py").write_text("")
    (model.parent / "helpers.py").write_text("")
    (tmp_path / "elsewhere").mkdir()
    os.symlink(model.parent, tmp_path / "elsewhere" / "project_link")
    os.symlink(model.parent / "helpers.py", tmp_path / "elsewhere" / "helpers_link.py")
    os.symlink(site / "torch", model.parent / "vendored_torch")
    (model.parent / "sub").mkdir()
    os.symlink(model.parent / "sub", tmp_path / "elsewhere" / "down")
    (tmp_path / "elsewhere" / "plain.py").write_text("")
    user = UserCode(model)
    cases = {
        str(tmp_path / "elsewhere" / "project_link" / "helpers.py"): True,
        str(tmp_path / "elsewhere" / "helpers_link.py"): True,
        str(model.parent / "vendored_torch" / "ops.py"): False,
        str(tmp_path / "elsewhere" / "down" / ".." / "helpers.py"): True,  # `..` of the link's target: the project
        str(site / "teamlib" / "layers.py"): True,
        str(tmp_path / "elsewhere" / "plain.py"): False,
    }
    assert {name: user.owns(name) for name in cases} == cases
    assert user.in_folder(str(tmp_path / "elsewhere" / "project_link" / "helpers.py"))
    assert not user.in_folder(str(site / "teamlib" / "layers.py"))
