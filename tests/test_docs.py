"""The README and the docs site cannot go stale: the generated tables are what the code gives, the output
blocks are what a fresh run prints (the suite's shared run of the model, tests/shared_runs.py), and the
site builds with `mkdocs build --strict`, which fails on a dead link or anchor."""

import functools
import importlib.util
import os
import re
import shutil
import subprocess
import sys
from pathlib import Path

import pytest

from compatcheck.report.model import Report, Status
from tests.conftest import ROOT


@functools.cache
def generator():
    """docs/generate.py, the script that writes the generated parts of the README and the docs."""
    spec = importlib.util.spec_from_file_location("docs_generate", ROOT / "docs" / "generate.py")
    module = importlib.util.module_from_spec(spec)
    sys.modules[spec.name] = module
    spec.loader.exec_module(module)
    return module


def output_runs() -> dict[Path, list[tuple[str, ...]]]:
    """model file -> the runs (command arguments) behind the output blocks that show it."""
    runs: dict[Path, list] = {}
    for page in generator().pages():
        for output in generator().outputs(page.read_text()):
            if output.fix:
                continue  # tests/test_fix.py checks the fix blocks against its own run of them
            listed = runs.setdefault(ROOT / output.run[0].partition(":")[0], [])
            if output.run not in listed:
                listed.append(output.run)
    return runs


def readme_block(after: str) -> str:
    """The first ```bash block of the README after the line `after`."""
    text = (ROOT / "README.md").read_text().split(after, 1)[1]
    return re.search(r"```bash\n(.*?)\n```", text, re.S).group(1)


def test_the_readme_is_a_front_door_of_at_most_200_lines():
    assert len((ROOT / "README.md").read_text().splitlines()) <= 200


def test_the_readme_set_up_commands_install_and_run_and_ci_runs_the_test_command():
    run = readme_block("## Set up and run")
    test = readme_block("Run the tests")
    assert run.startswith("python3 -m venv .venv && ") and run.endswith("compatcheck run models/convnet.py")
    assert test == ".venv/bin/pip install torch==2.13.0 -e '.[test,cpu,triton-local,openvino]' && .venv/bin/python -m pytest"
    assert test in (ROOT / ".ci" / "run").read_text()


def test_the_generated_tables_are_what_the_code_gives():
    """The options and layer tables (output blocks need a run: the slow tests below check them)."""
    regions = {m.group(2) for page in generator().pages() for m in generator().REGION.finditer(page.read_text())
               if m.group(1) == "generated"}
    assert regions == set(generator().TABLES)
    stale = [str(one) for page in generator().pages() for one in generator().update(page, {}, write=False)]
    assert stale == [], "regenerate with `python docs/generate.py`:\n" + "\n".join(stale)


def test_the_layer_table_lists_every_module_and_every_top_level_path_is_on_the_architecture_page():
    page = (ROOT / "docs" / "architecture.md").read_text()
    for path in (ROOT / "compatcheck").rglob("*.py"):
        assert f"`{path.relative_to(ROOT / 'compatcheck')}`" in page, path
    listed = subprocess.run(["git", "ls-files"], cwd=ROOT, capture_output=True, text=True)
    if listed.returncode != 0:
        pytest.skip("not a git checkout: no list of the repository's files")
    tops = {line.split("/")[0] + ("/" if "/" in line else "") for line in listed.stdout.splitlines()}
    missing = [top for top in sorted(tops - {".gitignore", "README.md"}) if f"`{top}" not in page]
    assert missing == [], f"docs/architecture.md's table of the repository does not name {missing}"


def test_the_docs_name_the_schema_version_the_code_writes_and_reads():
    from compatcheck.report.model import READABLE_VERSIONS, SCHEMA_VERSION

    report = (ROOT / "docs" / "report.md").read_text()
    assert f"\nschema_version   {SCHEMA_VERSION} (" in report
    changelog = report.split("## Schema changelog", 1)[1]
    assert [int(v) for v in re.findall(r"^\| (\d+) \|", changelog, re.M)] == sorted(READABLE_VERSIONS, reverse=True)
    refused = f"this compatcheck reads schema_version {READABLE_VERSIONS[0]} to {READABLE_VERSIONS[-1]}"
    assert refused in (ROOT / "docs" / "isolation.md").read_text()


def test_the_normalisation_blanks_only_the_timings():
    normalise = generator().normalise
    row = "│ compile           │ pass     │    0.00e+00 │    18.3 │          │\n"
    assert normalise(row) == normalise(row.replace("18.3", " 6.4")) != normalise(row.replace("pass", "fail"))
    assert normalise("total 35.5s\n") == normalise("total 110.9s\n")
    assert normalise(row) != normalise(row.replace("0.00e+00", "1.00e-07"))


# -- the output blocks, from the suite's shared run of the model ----------------------------------------

def shared_report(shared_runs, path: Path) -> tuple[Report, object]:
    run = shared_runs.get(path)
    report = Report.model_validate(run.report)
    problem = generator().other_torch(report)
    if problem:
        pytest.skip(problem)
    for args in output_runs()[path]:
        reason = generator().same_run(report, args)
        assert reason is None, (f"the suite's run of {path.name} is not the docs' `compatcheck run "
                                f"{' '.join(args)}`: {reason}; walk it with those options (tests/shared_runs.py)")
    return report, run


@pytest.mark.slow
@pytest.mark.parametrize("path", list(output_runs()), ids=lambda path: path.stem)
def test_the_output_blocks_are_what_a_fresh_run_prints(shared_runs, path):
    report, run = shared_report(shared_runs, path)
    # Rendering the JSON report is what the command printed (the shared run is 200 columns wide).
    assert generator().console_text(report, width=200) == run.process.stdout
    reports = {args: report for args in output_runs()[path]}
    stale = [str(one) for page in generator().pages() for one in generator().update(page, reports, write=False)]
    assert stale == [], "regenerate with `python docs/generate.py`:\n" + "\n".join(stale)


@pytest.mark.slow
@pytest.mark.parametrize("path", list(output_runs())[:1], ids=lambda path: path.stem)
def test_a_changed_verdict_makes_the_output_blocks_stale(shared_runs, path, tmp_path):
    """In a copy of the pages, with the model's jit_trace verdict changed in a copy of its report: the
    check fails on the blocks, and regenerating writes the new verdict into them."""
    report, _ = shared_report(shared_runs, path)
    pages = []
    for page in generator().pages():
        copy = tmp_path / page.relative_to(ROOT)
        copy.parent.mkdir(parents=True, exist_ok=True)
        pages.append(shutil.copy(page, copy))
    reports = {args: report for args in output_runs()[path]}
    assert [one for page in pages for one in generator().update(Path(page), reports, write=False)] == []

    changed = report.model_copy(deep=True)
    stage = next(stage for stage in changed.stages if stage.status is Status.MISMATCH)
    stage.status, stage.reason = Status.PASS, None
    reports = {args: changed for args in output_runs()[path]}
    stale = [one for page in pages for one in generator().update(Path(page), reports, write=True)]
    assert stale, "a changed verdict left every output block as it was"
    row = re.compile(rf"^(?P<sign>[-+]?)│ {stage.name} +│ (?P<verdict>\w+) +│", re.M)
    changes = {(m["sign"], m["verdict"]) for one in stale for m in row.finditer(one.diff) if m["sign"]}
    assert changes == {("-", "mismatch"), ("+", "pass")}, changes
    assert {m["verdict"] for m in row.finditer((tmp_path / "README.md").read_text())} == {"pass"}
    assert [one for page in pages for one in generator().update(Path(page), reports, write=False)] == []


# -- the site -------------------------------------------------------------------------------------------

def mkdocs_build(folder: Path, site: Path) -> subprocess.CompletedProcess:
    if importlib.util.find_spec("mkdocs") is None or importlib.util.find_spec("material") is None:
        pytest.skip("mkdocs and mkdocs-material are not installed (the test and docs extras bring them)")
    return subprocess.run([sys.executable, "-m", "mkdocs", "build", "--strict", "--site-dir", str(site)],
                          cwd=folder, capture_output=True, text=True, timeout=300,
                          env={**os.environ, "NO_MKDOCS_2_WARNING": "1"})


def test_the_site_builds_strict_with_every_page_in_the_nav(tmp_path):
    proc = mkdocs_build(ROOT, tmp_path / "site")
    assert proc.returncode == 0, proc.stderr
    assert "WARNING" not in proc.stderr
    built = {p.relative_to(tmp_path / "site").as_posix() for p in (tmp_path / "site").rglob("index.html")}
    assert "cli/index.html" in built and "architecture/index.html" in built


def test_a_dead_link_a_dead_anchor_an_absolute_link_and_a_page_left_out_of_the_nav_fail_the_build(tmp_path):
    shutil.copytree(ROOT / "docs", tmp_path / "docs")
    shutil.copy(ROOT / "mkdocs.yml", tmp_path / "mkdocs.yml")
    with (tmp_path / "docs" / "index.md").open("a") as page:
        page.write("\n[gone](no-such-page.md), [nowhere](stages.md#no-such-heading), [root](/stages.md)\n")
    (tmp_path / "docs" / "orphan.md").write_text("# Not in the nav\n")
    proc = mkdocs_build(tmp_path, tmp_path / "site")
    assert proc.returncode != 0
    for named in ("'no-such-page.md'", "'#no-such-heading'", "'/stages.md'", "orphan.md"):
        assert named in proc.stderr, (named, proc.stderr)
