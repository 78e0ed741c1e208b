"""A run's files under hostile use: shared folders, edited or foreign reports, outputs that are inputs,
unwritable outputs, odd files beside the model. Each run gets a temporary folder of its own; after every
test nothing of the run is left running and no working folder is left in it."""

import json
import os
import re
import signal
import subprocess
import sys
from pathlib import Path

import pytest

from tests.conftest import MODELS, ROOT, run_cli, verdicts
from tests.faults.conftest import poll_until_empty, wait_until_hanging
from tests.faults.test_bad_input import assert_one_line_usage_error
from tests.faults.test_process_faults import processes_mentioning

PASSES_TRACE = "import torch\ndef get_model():\n    return torch.nn.Linear(4, 3)\ndef get_inputs():\n    return torch.randn(2, 4)\n"
FAILS_TRACE = (MODELS / "dict_outputs.py").read_text()  # jit.trace refuses a dict output


@pytest.fixture
def temp(tmp_path):
    """TMPDIR for the runs of one test; afterwards none of its processes or working folders remain."""
    folder = tmp_path / "tmp"
    folder.mkdir()
    yield folder
    assert poll_until_empty(lambda: processes_mentioning(str(tmp_path))) == []
    assert [p.name for p in folder.glob("compatcheck-run-*") if not p.name.endswith("-live")] == []


def run(temp, *args, timeout=300, env=None):
    return run_cli(*args, timeout=timeout, env={"TMPDIR": str(temp), **(env or {})})


@pytest.mark.slow
def test_runs_sharing_an_artifacts_folder_never_mix_models_or_poison_the_cache(tmp_path, temp):
    base, other = tmp_path / "base.py", tmp_path / "other.py"
    base.write_text(PASSES_TRACE)
    other.write_text(FAILS_TRACE)
    shared = tmp_path / "art"
    # Workers that take a second to start, as on a loaded machine: the two runs surely overlap.
    slow = tmp_path / "slow"
    slow.mkdir()
    (slow / "sitecustomize.py").write_text(
        "import sys, time\nif any('worker-request-' in arg for arg in sys.argv):\n    time.sleep(1)\n")
    expected = {base: {"eager": "pass", "jit_trace": "pass"}, other: {"eager": "pass", "jit_trace": "fail"}}
    for attempt in range(2):
        procs = {}
        for model in (base, other):
            out = tmp_path / f"{model.stem}-{attempt}.json"
            procs[model] = (out, subprocess.Popen(
                [sys.executable, "-m", "compatcheck", "run", str(model), "--stages", "eager,jit_trace",
                 "--artifacts", str(shared), "--json", str(out), "--quiet"],
                cwd=ROOT, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True,
                env={**os.environ, "TMPDIR": str(temp), "PYTHONPATH": str(slow)}))
        for model, (out, proc) in procs.items():
            stdout, stderr = proc.communicate(timeout=300)
            if proc.returncode == 2:  # refused: the other run holds the folder
                assert "is in use by another compatcheck run" in stderr and len(stderr.strip().splitlines()) == 1
                continue
            report = json.loads(out.read_text())
            assert report["model"]["path"] == str(model), f"attempt {attempt}: a run checked the other model"
            assert verdicts(report) == expected[model], f"attempt {attempt}: {stdout}{stderr}"
    # The cache holds each model's own verdicts: a later run alone gets what an uncached run gets.
    alone = run(temp, "run", str(base), "--stages", "eager,jit_trace", "--json", str(tmp_path / "alone.json"))
    fresh = run(temp, "run", str(base), "--stages", "eager,jit_trace", "--no-cache")
    assert alone.returncode == fresh.returncode == 0, alone.stdout + fresh.stdout
    assert verdicts(json.loads((tmp_path / "alone.json").read_text())) == expected[base]


def test_a_second_run_on_a_folder_in_use_is_refused_and_the_first_keeps_it(tmp_path, temp):
    model = tmp_path / "hangs.py"
    model.write_text((Path(__file__).parent / "models" / "hangs_if_asked.py").read_text())
    shared = tmp_path / "art"
    first = subprocess.Popen(
        [sys.executable, "-m", "compatcheck", "run", str(model), "--stages", "eager,jit_trace", "--artifacts",
         str(shared), "--no-cache"], cwd=ROOT, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL,
        env={**os.environ, "TMPDIR": str(temp), "FAULT_TEST_HANG": str(tmp_path / "hanging")})
    try:
        wait_until_hanging(tmp_path / "hanging", first)
        assert (shared / "inputs.npz").exists() and (shared / "reproduce_eager.py").exists(), \
            "a finished stage's files are in --artifacts at once"
        second = run(temp, "run", str(tmp_path / "hangs.py"), "--stages", "eager", "--artifacts", str(shared))
        assert_one_line_usage_error(second, f"error: --artifacts {shared} is in use by another compatcheck run "
                                            f"(pid {first.pid})")
    finally:
        first.send_signal(signal.SIGINT)
        first.wait(timeout=60)


def test_resume_keeps_only_what_the_same_unchanged_model_produced(tmp_path, temp):
    model, out = tmp_path / "model.py", tmp_path / "report.json"
    model.write_text(PASSES_TRACE)
    first = run(temp, "run", str(model), "--stages", "eager,jit_trace", "--json", str(out), "--no-cache")
    assert first.returncode == 0, first.stdout + first.stderr

    # The same file, edited: nothing is resumed and the stages run again.
    model.write_text(FAILS_TRACE)
    edited = run(temp, "run", str(model), "--stages", "eager,jit_trace", "--json", str(out), "--resume", "--no-cache")
    assert edited.returncode == 1
    assert verdicts(json.loads(out.read_text())) == {"eager": "pass", "jit_trace": "fail"}
    assert f"--resume: nothing resumed, every stage runs again: {model} changed" in edited.stderr

    # Another model resuming this report: nothing is resumed either.
    other = tmp_path / "other.py"
    other.write_text(PASSES_TRACE)
    foreign = run(temp, "run", str(other), "--stages", "eager,jit_trace", "--json", str(out), "--resume",
                  "--no-cache")
    assert foreign.returncode == 0, foreign.stdout + foreign.stderr
    report = json.loads(out.read_text())
    assert report["model"]["path"] == str(other) and verdicts(report) == {"eager": "pass", "jit_trace": "pass"}
    assert "the report is of another model" in foreign.stderr


def test_an_output_that_is_an_input_is_refused_or_never_overwritten(tmp_path, temp):
    model = tmp_path / "model.py"
    source = (PASSES_TRACE.replace("def get_inputs():\n    return torch.randn(2, 4)\n", "")
              + "import json, os\nimport numpy as np\nHERE = os.path.dirname(os.path.abspath(__file__))\n"
              "def get_inputs():\n"
              "    json.load(open(os.path.join(HERE, 'config.json')))\n"
              "    return torch.from_numpy(np.load(os.path.join(HERE, 'inputs.npz'))['x'])\n")
    model.write_text(source)
    (tmp_path / "config.json").write_text("{}")
    import numpy as np

    np.savez(tmp_path / "inputs.npz", x=np.ones((2, 4), dtype=np.float32))
    mine = (tmp_path / "inputs.npz").read_bytes()
    rewrites = tmp_path / "rewrites.yaml"
    rewrites.write_text("[]\n")

    assert_one_line_usage_error(run(temp, "run", str(model), "--json", str(model)),
                                f"error: --json {model} is the model file")
    assert_one_line_usage_error(run(temp, "run", str(model), "--rewrites", str(rewrites), "--markdown", str(rewrites)),
                                f"error: --markdown {rewrites} is the --rewrites catalog")
    assert model.read_text() == source and rewrites.read_text() == "[]\n"

    # Files the model reads are known once it ran: --artifacts and --json leave them alone.
    proc = run(temp, "run", str(model), "--stages", "eager", "--artifacts", str(tmp_path),
               "--json", str(tmp_path / "config.json"))
    assert proc.returncode == 0, proc.stdout + proc.stderr
    assert (tmp_path / "inputs.npz").read_bytes() == mine and (tmp_path / "config.json").read_text() == "{}"
    assert f"not written into --artifacts: {tmp_path / 'inputs.npz'} is a file the run loaded" in proc.stderr
    kept = proc.stderr.split("it was written to ")[1].split()[0]
    assert json.loads(Path(kept).read_text())["model"]["path"] == str(model)
    Path(kept).unlink()


def test_an_unwritable_report_path_is_refused_before_any_stage(tmp_path, temp):
    proc = run(temp, "run", str(MODELS / "convnet.py"), "--json", "/sys/report.json", timeout=60)
    assert_one_line_usage_error(proc, "error: cannot write --json /sys/report.json")


def test_a_report_whose_folder_vanished_mid_run_is_kept_and_its_place_said(tmp_path, temp):
    folder = tmp_path / "reports"
    folder.mkdir()
    model = tmp_path / "model.py"
    model.write_text("import shutil\n" + PASSES_TRACE + f"shutil.rmtree({str(folder)!r})\n")
    proc = run(temp, "run", str(model), "--stages", "eager", "--json", str(folder / "r.json"), "--quiet")
    assert proc.returncode == 0 and "Traceback" not in proc.stderr, proc.stderr
    assert f"error: cannot write --json {folder / 'r.json'}" in proc.stderr
    kept = Path(proc.stderr.split("it was written to ")[1].split()[0])
    assert verdicts(json.loads(kept.read_text())) == {"eager": "pass"}
    kept.unlink()


@pytest.mark.parametrize("kind", ["folder", "broken link", "fifo"])
def test_odd_files_named_py_beside_the_model_neither_break_nor_block_the_run(tmp_path, temp, kind):
    model = tmp_path / "model.py"
    model.write_text(PASSES_TRACE)
    odd = tmp_path / "odd.py"
    if kind == "folder":
        odd.mkdir()
    elif kind == "broken link":
        odd.symlink_to(tmp_path / "nowhere.py")
    else:
        os.mkfifo(odd)
    for _ in range(2):  # the second run looks the cache up
        proc = run(temp, "run", str(model), "--stages", "eager", "--timeout", "60", timeout=120)
        assert proc.returncode == 0 and "Traceback" not in proc.stderr, proc.stdout + proc.stderr
    assert "pass (cached)" in proc.stdout


@pytest.mark.parametrize("command", ["checklist", "resume"])
def test_a_report_with_a_value_the_schema_rejects_is_one_line(tmp_path, temp, command):
    report = tmp_path / "report.json"
    report.write_text(json.dumps({"schema_version": 1, "tool_version": "0.1.0", "created": "now",
                                  "stages": [{"name": "eager", "status": "exploded"}]}))
    args = (["checklist", str(report)] if command == "checklist"
            else ["run", str(MODELS / "convnet.py"), "--json", str(report), "--resume"])
    assert_one_line_usage_error(run(temp, *args, timeout=60),
                                f'error: {report}: field stages.0.status has value "exploded"')


def test_stale_working_folders_are_removed_only_when_their_run_is_gone(tmp_path, temp):
    gone = subprocess.Popen([sys.executable, "-c", "pass"])
    gone.wait()
    stale = temp / "compatcheck-run-stale"
    stale.mkdir()
    (stale / "owner").write_text(f"{gone.pid} \n")
    (stale / "model.onnx").write_text("left by a killed run")
    elsewhere = temp / "compatcheck-run-elsewhere-live"  # a run in a container sharing the temporary folder
    elsewhere.mkdir()
    (elsewhere / "owner").write_text(f"{gone.pid} 1\n")
    (elsewhere / "owner-namespace").write_text("pid:[1]\n")
    alive = subprocess.Popen([sys.executable, "-c", "import time; time.sleep(120)"])
    try:
        live = temp / "compatcheck-run-live"  # a matrix cell still running, say
        live.mkdir()
        started = Path(f"/proc/{alive.pid}/stat").read_text().rsplit(")", 1)[1].split()[19]
        (live / "owner").write_text(f"{alive.pid} {started}\n")
        (tmp_path / "model.py").write_text(PASSES_TRACE)
        proc = run(temp, "run", str(tmp_path / "model.py"), "--stages", "eager")
        assert proc.returncode == 0, proc.stdout + proc.stderr
        assert not stale.exists(), "the folder of a run that is gone is removed"
        assert (live / "owner").exists(), "a live run's folder is never touched"
        assert (elsewhere / "owner").exists(), "nor one whose owner's pid means nothing here"
    finally:
        alive.kill()
        alive.wait()


def test_a_live_run_keeps_its_folder_from_a_release_that_reads_the_owner_as_pid_and_start(temp, monkeypatch):
    import tempfile

    from compatcheck.session.workfolder import WorkFolder, clean_stale
    monkeypatch.setenv("TMPDIR", str(temp))
    monkeypatch.setattr(tempfile, "tempdir", None)
    folder = WorkFolder()
    try:
        # the rule of releases before the namespace was recorded: the rest of the line is the start time
        pid, _, started = (folder.path / "owner").read_text().strip().partition(" ")
        assert int(pid) == os.getpid()
        assert started == Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()[19], \
            "an earlier release would take this live run's folder for a reused pid's and remove it"
        clean_stale(temp)
        assert (folder.path / "owner").exists()
    finally:
        folder.close()


def test_a_file_the_worker_removes_while_it_is_copied_is_left_out(tmp_path, monkeypatch):
    """The worker writes a stage's reproducer before the stage and removes it when the stage skips; the
    parent's copy into --artifacts can list it and then find it gone. It goes on without it."""
    from compatcheck.session import workfolder

    work, artifacts = tmp_path / "work", tmp_path / "artifacts"
    work.mkdir()
    artifacts.mkdir()
    (work / "reproduce_aot_inductor.py").write_text("removed while it is copied")
    (work / "model.onnx").write_text("kept")
    copy = workfolder.copy_into

    def removed_first(source, folder, name, **kwargs):
        if Path(source).name.startswith("reproduce_"):
            Path(source).unlink()
        return copy(source, folder, name, **kwargs)

    monkeypatch.setattr(workfolder, "copy_into", removed_first)
    published = workfolder.Published(artifacts)
    published.sync(work)
    published.close()
    assert sorted(p.name for p in artifacts.iterdir() if p.name != workfolder.LOCK) == ["model.onnx"]


def test_a_link_planted_as_the_artifacts_lock_is_refused_and_never_written_through(tmp_path, temp):
    (tmp_path / "model.py").write_text(PASSES_TRACE)
    victim, locked = tmp_path / "victim.txt", tmp_path / "art"
    victim.write_text("the user's own file\n")
    locked.mkdir()
    (locked / ".compatcheck.lock").symlink_to(victim)
    proc = run(temp, "run", str(tmp_path / "model.py"), "--stages", "eager", "--artifacts", str(locked), timeout=120)
    assert_one_line_usage_error(proc, f"error: cannot lock --artifacts {locked}: {locked / '.compatcheck.lock'}: "
                                      "it is a symbolic link")
    assert victim.read_text() == "the user's own file\n"


@pytest.fixture
def full_disk(tmp_path):
    """A real filesystem of 1 MiB with no space left (a tmpfs, which takes root to mount)."""
    folder = tmp_path / "full"
    folder.mkdir()
    mounted = subprocess.run(["mount", "-t", "tmpfs", "-o", "size=1m", "tmpfs", str(folder)], capture_output=True,
                             text=True)
    if mounted.returncode != 0:
        pytest.skip(f"cannot mount a tmpfs here: {(mounted.stderr or mounted.stdout).strip()}")
    try:
        with open(folder / "filler", "wb", buffering=0) as filler:
            try:
                while filler.write(b"\0" * 65536):
                    pass
            except OSError:
                pass
        yield folder
    finally:
        subprocess.run(["umount", "-l", str(folder)], check=True)


def test_a_full_disk_loses_no_verdict_and_leaves_no_partial_file(tmp_path, temp, full_disk):
    model = tmp_path / "model.py"
    model.write_text(PASSES_TRACE)
    json_path, junit_path = full_disk / "report.json", full_disk / "junit.xml"
    proc = run(temp, "run", str(model), "--stages", "jit_script", "--artifacts", str(full_disk / "art"), "--json",
               str(json_path), "--junit", str(junit_path), env={"COMPATCHECK_CACHE_DIR": str(full_disk / "cache")})
    assert proc.returncode == 0 and "Traceback" not in proc.stderr, proc.stdout + proc.stderr
    assert re.search(r"│ jit_script +│ pass ", proc.stdout), proc.stdout
    lines = proc.stderr.splitlines()
    assert len(lines) == 4, proc.stderr
    assert lines[0] == f"results not cached in {full_disk / 'cache'}: No space left on device"
    assert lines[1].startswith("not written into --artifacts (No space left on device): ")
    assert str(full_disk / "art" / "model.script.pt") in lines[1]
    for line, flag, path, start in zip(lines[2:], ("--json", "--junit"), (json_path, junit_path), ("{", "<?xml")):
        assert line.startswith(f"error: cannot write {flag} {path} (No space left on device); it was written to ")
        kept = Path(line.rsplit(" ", 1)[1])
        assert kept.read_text().startswith(start)
        kept.unlink()
    left = [p.name for p in full_disk.rglob("*") if p.name.endswith(".partial") or p.name.startswith((".report", ".junit"))]
    assert left == []
