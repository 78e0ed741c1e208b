"""A result cache that others could write: forged, corrupted, escaping, foreign and raced entries, planted
programs, and `cache clear` on a folder of the user's files. Nothing planted is served, written outside
the run's folders or executed; the verdicts are what a run without the cache gets."""

import hashlib
import json
import os
import pickle
import shutil
import subprocess
import sys
import zipfile
from pathlib import Path

import pytest

from compatcheck.session.cache import key_file, tag
from tests.conftest import ROOT, cache_dir, verdicts
from tests.faults.conftest import wait_until_hanging
from tests.faults.test_run_files import run, temp  # noqa: F401  (temp is a fixture)

# jit_trace freezes is_tracing() as True: a mismatch; every other stage passes.
MODEL = """\
import torch


class Net(torch.nn.Module):
    def __init__(self):
        super().__init__()
        self.linear = torch.nn.Linear(3, 2)

    def forward(self, x):
        return self.linear(x) * 2 + 1.0 * torch.jit.is_tracing()


def get_model():
    return Net()


def get_inputs():
    return [torch.ones(2, 3), torch.randn(4, 3)]
"""
STAGES = "jit_script,jit_trace,onnx_export,onnxruntime"


def sha256(path: Path) -> str:
    return hashlib.sha256(path.read_bytes()).hexdigest()


def entry_of(cache: Path, stage: str) -> Path:
    (entry,) = cache.glob(f"*/{stage}/*")
    return entry


def body_of(entry: Path) -> dict:
    return json.loads((entry / "entry.json").read_bytes().split(b"\n", 1)[1])


def seal(entry: Path, body: dict) -> None:
    """Write the entry with a tag that verifies: what a holder of the key (or a bug) could store."""
    text = json.dumps(body).encode()
    key = key_file().read_bytes().strip()
    (entry / "entry.json").write_bytes(tag(key, entry.parent.parent.name, entry.parent.name, text).encode() + b"\n"
                                       + text)


def ignored(stderr: str) -> list[str]:
    return [line for line in stderr.splitlines() if "ignored, the stage runs" in line]


def published(folder: Path) -> list[str]:
    return sorted(p.name for p in folder.iterdir() if not p.name.startswith("."))


def test_a_forged_corrupted_escaping_or_linked_entry_is_never_served_and_links_are_never_written_through(
        tmp_path, temp):
    model, cache = tmp_path / "model.py", cache_dir()
    model.write_text(MODEL)
    cold_art, warm_art = tmp_path / "cold-art", tmp_path / "warm-art"
    cold = run(temp, "run", str(model), "--stages", STAGES, "--artifacts", str(cold_art), "--json",
               str(tmp_path / "cold.json"))
    expected = verdicts(json.loads((tmp_path / "cold.json").read_text()))
    assert expected == {"eager": "pass", "jit_script": "pass", "jit_trace": "mismatch", "onnx_export": "pass",
                        "onnxruntime": "pass"} and cold.returncode == 1, cold.stdout + cold.stderr
    for path in cache.rglob("*"):
        assert not path.stat().st_mode & (0o077 if path.is_dir() else 0o022), f"{path} is open to others"

    victim = temp / "victim.txt"  # where `../victim.txt` lands from the run's working folder
    victim.write_text("the user's own file\n")
    escaping = entry_of(cache, "jit_script")
    (escaping.parent / "victim.txt").write_text("planted\n")
    body = body_of(escaping)
    body["files"]["../victim.txt"] = sha256(escaping.parent / "victim.txt")
    seal(escaping, body)
    forged = entry_of(cache, "jit_trace") / "entry.json"
    forged.write_text(forged.read_text().replace('"status": "mismatch"', '"status": "pass"'))
    assert '"status": "pass"' in forged.read_text()
    random = os.urandom(2048)
    (entry_of(cache, "onnx_export") / "model.onnx").write_bytes(random)
    shutil.rmtree(entry_of(cache, "onnxruntime"))  # it runs on whatever ONNX file it is given
    linked = entry_of(cache, "eager") / "reproduce_eager.py"
    (tmp_path / "same-bytes.py").write_bytes(linked.read_bytes())
    linked.unlink()
    linked.symlink_to(tmp_path / "same-bytes.py")
    # Links planted in --artifacts, as the temporary file the run writes and as a file it publishes.
    warm_art.mkdir()
    planted = {name: tmp_path / f"victim-{name}" for name in (".model.script.pt.partial", "model.script.pt")}
    for name, target in planted.items():
        target.write_text(f"the user's own file, linked as {name}\n")
        (warm_art / name).symlink_to(target)
    untouched = {target: sha256(target) for target in [victim, *planted.values()]}

    warm = run(temp, "run", str(model), "--stages", STAGES, "--artifacts", str(warm_art), "--json",
               str(tmp_path / "warm.json"))
    report = json.loads((tmp_path / "warm.json").read_text())
    assert verdicts(report) == expected and warm.returncode == 1, warm.stdout + warm.stderr
    assert not any(stage["cached"] for stage in report["stages"])
    reasons = sorted(line.split(": ", 1)[1] for line in ignored(warm.stderr))
    assert reasons == sorted([
        "a file name in it leads out of the entry",
        "its tag does not verify: it was not stored by this user's compatcheck under this cache key "
        "(COMPATCHECK_CACHE_KEY or the key file), or it was changed since",
        f"{entry_of(cache, 'onnx_export') / 'model.onnx'} does not hold the bytes it was stored with",
        f"{linked} is a symbolic link"]), warm.stderr
    assert "Traceback" not in warm.stderr
    assert {target: sha256(target) for target in untouched} == untouched, "a file outside the run's folders changed"
    assert published(warm_art) == published(cold_art)
    assert (warm_art / "model.onnx").read_bytes() != random
    assert not (warm_art / "model.script.pt").is_symlink() and (warm_art / ".model.script.pt.partial").is_symlink()

    # The stages stored their entries again, over the bad ones: the next run is served whole.
    again = run(temp, "run", str(model), "--stages", STAGES, "--json", str(tmp_path / "again.json"))
    report = json.loads((tmp_path / "again.json").read_text())
    assert verdicts(report) == expected and all(stage["cached"] for stage in report["stages"])
    assert ignored(again.stderr) == [], again.stderr


def forge_program(real: Path, forged: Path, marker: Path) -> None:
    """A torch.export program whose weights unpickle to a call that creates `marker`."""

    class Payload:
        def __reduce__(self):
            return os.mkdir, (str(marker),)

    with zipfile.ZipFile(real) as source, zipfile.ZipFile(forged, "w") as out:
        for info in source.infolist():
            data = source.read(info.filename)
            if info.filename.endswith("model_weights_config.json"):
                config = json.loads(data)
                for weight in config["config"].values():
                    weight["use_pickle"] = True
                data = json.dumps(config).encode()
            elif "/data/weights/weight_" in info.filename:
                data = pickle.dumps(Payload())
            out.writestr(info, data)


def test_a_planted_exported_program_is_never_loaded_from_the_cache_or_from_artifacts(tmp_path, temp):
    model, art, out = tmp_path / "model.py", tmp_path / "art", tmp_path / "report.json"
    model.write_text(MODEL)
    # A compiler that fails at once: aot_inductor loads the export stage's program, then stops quickly.
    compiler = tmp_path / "cxx"
    compiler.write_text('#!/bin/sh\ncase "$1" in --version|-v) echo "g++ (GCC) 12.2.0"; exit 0;; esac\nexit 1\n')
    compiler.chmod(0o755)
    env = {"CXX": str(compiler)}
    first = run(temp, "run", str(model), "--stages", "export", "--artifacts", str(art), "--json", str(out), env=env)
    assert first.returncode == 0, first.stdout + first.stderr
    from_artifacts, from_cache = tmp_path / "ran-from-artifacts", tmp_path / "ran-from-cache"
    cached = entry_of(cache_dir(), "export") / "model.export.pt2"
    forge_program(art / "model.export.pt2", tmp_path / "forged.pt2", from_artifacts)
    shutil.copy(tmp_path / "forged.pt2", art / "model.export.pt2")
    forge_program(cached, tmp_path / "forged-cached.pt2", from_cache)
    shutil.copy(tmp_path / "forged-cached.pt2", cached)
    # The report as a run interrupted before aot_inductor leaves it, to resume.
    report = json.loads(out.read_text())
    report["options"]["stages"] = ["eager", "export", "aot_inductor"]
    report["stages"].append({"name": "aot_inductor", "status": "skip", "reason": "interrupted before it ran"})
    report["interrupted"] = True
    out.write_text(json.dumps(report))

    resumed = run(temp, "run", str(model), "--stages", "export,aot_inductor", "--artifacts", str(art), "--json",
                  str(out), "--resume", env=env)
    assert not from_artifacts.exists() and not from_cache.exists(), "a planted program ran"
    report = json.loads(out.read_text())
    assert verdicts(report) == {"eager": "pass", "export": "pass", "aot_inductor": "fail"}, resumed.stderr
    assert "CppCompileError" in report["stages"][2]["reason"], "it compiled the program export made again"
    assert not report["stages"][1]["cached"]
    assert [line.split(": ", 1)[1] for line in ignored(resumed.stderr)] == [
        f"{cached} does not hold the bytes it was stored with"]
    assert (art / "model.export.pt2").read_bytes() != (tmp_path / "forged.pt2").read_bytes()


@pytest.mark.skipif(os.getuid() != 0, reason="planting another user's entry takes root (chown)")
def test_check_serves_no_entry_of_another_user_or_under_another_key(tmp_path, monkeypatch, capfd):
    from compatcheck import check

    model = tmp_path / "model.py"
    model.write_text(MODEL)
    monkeypatch.setenv("COMPATCHECK_CACHE_KEY", "the secret of one CI job")
    first = check(str(model), stages=["jit_script"])
    foreign = entry_of(cache_dir(), "jit_script")
    for path in (foreign, *foreign.iterdir()):
        os.chown(path, 4242, 4242)
    monkeypatch.setenv("COMPATCHECK_CACHE_KEY", "the secret of another job")
    capfd.readouterr()
    second = check(str(model), stages=["jit_script"])
    said = ignored(capfd.readouterr().err)
    assert [stage.status for stage in second.stages] == [stage.status for stage in first.stages]
    assert not any(stage.cached for stage in second.stages)
    assert len(said) == 2, said
    assert "the entry belongs to uid 4242, not to this user" in said[0] + said[1]
    assert "its tag does not verify" in said[0] + said[1]


WAITS = MODEL.replace("def get_model():\n", """\
def get_model():
    import os, time
    open(os.environ["FAULT_TEST_LOADED"], "w").close()
    for _ in range(6000):  # until the test has edited this file and run version 2
        if os.path.exists(os.environ["FAULT_TEST_GO"]):
            break
        time.sleep(0.05)
""").replace(" + 1.0 * torch.jit.is_tracing()", "")


def test_a_run_stores_what_it_loaded_not_what_the_file_holds_when_it_ends(tmp_path, temp):
    model = tmp_path / "model.py"
    model.write_text(WAITS)  # version 1: jit_trace passes
    loaded, go = tmp_path / "loaded", tmp_path / "go"
    command = [sys.executable, "-m", "compatcheck", "run", str(model), "--stages", "jit_trace", "--json",
               str(tmp_path / "a.json"), "--quiet"]
    first = subprocess.Popen(command, cwd=ROOT, stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True,
                             env={**os.environ, "TMPDIR": str(temp), "FAULT_TEST_LOADED": str(loaded),
                                  "FAULT_TEST_GO": str(go)})
    try:
        wait_until_hanging(loaded, first)
        model.write_text(MODEL)  # version 2: jit_trace mismatches
        second = run(temp, "run", str(model), "--stages", "jit_trace", "--json", str(tmp_path / "b.json"))
        assert second.returncode == 1
        go.touch()
        said, _ = first.communicate(timeout=300)
    finally:
        go.touch()
        first.wait(timeout=300)
    assert first.returncode == 0, said
    assert verdicts(json.loads((tmp_path / "a.json").read_text()))["jit_trace"] == "pass"

    stored = {body["dependencies"]["files"][str(model)]: body["result"]["status"]
              for body in map(body_of, cache_dir().glob("*/jit_trace/*"))}
    assert stored == {hashlib.sha256(WAITS.encode()).hexdigest(): "pass",
                      hashlib.sha256(MODEL.encode()).hexdigest(): "mismatch"}
    third = run(temp, "run", str(model), "--stages", "jit_trace", "--json", str(tmp_path / "c.json"))
    report = json.loads((tmp_path / "c.json").read_text())
    assert third.returncode == 1 and verdicts(report)["jit_trace"] == "mismatch" and report["stages"][1]["cached"]


def test_cache_clear_on_a_folder_of_user_files_removes_only_cache_entries(tmp_path):
    home = tmp_path / "home"
    (home / "project" / "src").mkdir(parents=True)
    (home / "notes.txt").write_text("mine\n")
    (home / "project" / "src" / "main.py").write_text("print('mine')\n")
    subprocess.run(["git", "init", "-q", str(home / "project")], check=True)
    entry = home / ("0" * 32) / "eager" / ("1" * 16)
    entry.mkdir(parents=True)
    (entry / "entry.json").write_text("{}")
    (home / ("0" * 32) / "eager" / "kept.txt").write_text("not an entry\n")
    mine = {p: sha256(p) for p in home.rglob("*") if p.is_file() and entry not in p.parents}

    env = {"COMPATCHECK_CACHE_DIR": str(home)}
    info = subprocess.run([sys.executable, "-m", "compatcheck", "cache", "info"], cwd=ROOT, capture_output=True,
                          text=True, env={**os.environ, **env}, timeout=60)
    assert info.stdout.splitlines()[0].startswith(f"{home}: 1 entries, ")
    assert "  and 2 other files or folders, which are not the cache's: `cache clear` leaves them" in info.stdout
    cleared = subprocess.run([sys.executable, "-m", "compatcheck", "cache", "clear"], cwd=ROOT, capture_output=True,
                             text=True, env={**os.environ, **env}, timeout=60)
    assert cleared.returncode == 0 and cleared.stdout == f"removed 1 entries from {home}\n"
    assert not entry.exists()
    assert {p: sha256(p) for p in home.rglob("*") if p.is_file()} == mine
    assert subprocess.run(["git", "-C", str(home / "project"), "status"], capture_output=True).returncode == 0
