"""Workers side by side change nothing but the timings; and torch.compile's swept sizes, held to the
graphs the input sets compiled."""

import json
import re

import pytest
import torch

from compatcheck.diagnose.dynamo import recompile_reason
from tests.conftest import ROOT, run_cli
from tests.test_docs import generator

# What may differ between two runs of one model with other --jobs: timings, how many workers ran, the command.
PROGRESS = re.compile(r"^  (\w+: [\w-]+) \([\d.]+s\)$")
TIMING = {"seconds", "budget", "created", "timings", "cached_from", "log_cut", "workers", "command"}


def _untimed(value):
    if isinstance(value, dict):
        return {key: _untimed(one) for key, one in value.items() if key not in TIMING}
    if isinstance(value, list):
        return [_untimed(one) for one in value]
    return value


@pytest.mark.slow
def test_a_run_says_the_same_with_one_worker_and_with_two(tmp_path):
    reports = {}
    for jobs in ("1", "2"):
        out = tmp_path / f"jobs{jobs}.json"
        proc = run_cli("run", str(ROOT / "models" / "convnet.py"), "--stages", "jit_trace,onnx_export,onnxruntime",
                       "--jobs", jobs, "--no-cache", "--json", str(out), timeout=600)
        reports[jobs] = (proc.stdout, json.loads(out.read_text()))
    assert _untimed(reports["1"][1]) == _untimed(reports["2"][1])
    # The console as the docs compare it (the seconds column and the total blanked); the progress lines come
    # as stages end, so in another order with two workers: each is there, with its verdict.
    (progress_1, rest_1), (progress_2, rest_2) = (_split(reports[jobs][0]) for jobs in ("1", "2"))
    assert _blanked(rest_1) == _blanked(rest_2)
    assert sorted(progress_1) == sorted(progress_2)


def _blanked(text: str) -> str:
    """The output as the docs compare it, and every other '(N.Ns)' blanked too (the sweep's seconds)."""
    return re.sub(r"\(\d+(\.\d+)?s\)", "(…s)", generator().normalise(text))


def _split(stdout: str) -> tuple[list[str], str]:
    """The progress lines ('  onnx_export: pass (1.2s)', seconds left out) and the rest of the output."""
    progress = [PROGRESS.match(line) for line in stdout.splitlines()]
    return ([match.group(1) for match in progress if match],
            "\n".join(line for line, match in zip(stdout.splitlines(), progress) if not match))


def test_dynamos_refusal_to_compile_again_is_read_with_its_guard():
    compiled = torch.compile(torch.nn.Linear(4, 2), backend="eager")
    with torch.no_grad():
        compiled(torch.randn(2, 4))
        compiled(torch.randn(5, 4))  # a second size: dynamic from here on
        with torch.compiler.set_stance("fail_on_recompile"):
            compiled(torch.randn(7, 4))  # covered: no error
            with pytest.raises(RuntimeError) as refused:
                compiled(torch.randn(1, 4))
    assert recompile_reason(refused.value).endswith("fails: 0/1 specialization")
    assert recompile_reason(RuntimeError("shape mismatch")) is None


@pytest.mark.slow
def test_compiles_swept_batch_of_one_is_recorded_as_a_recompile_not_compiled_for(tmp_path):
    out = tmp_path / "report.json"
    run_cli("run", str(ROOT / "models" / "convnet.py"), "--stages", "compile", "--compile-backend", "eager",
            "--json", str(out), timeout=600)
    [compile_stage] = [s for s in json.loads(out.read_text())["stages"] if s["name"] == "compile"]
    assert compile_stage["status"] == "pass"
    [recompile] = compile_stage["recompiles"]
    assert recompile.startswith("batch 1: torch.compile would compile again for it (guard ")
    assert "0/1 specialization" in recompile
    assert [one["label"] for one in compile_stage["swept"]] == ["batch 7"]  # the size the graphs cover is run
    assert "not run at batch 1" in compile_stage["reason"]


def test_each_lane_runs_the_stages_that_compile_with_inductor_last():
    from compatcheck.ladder import BY_NAME, NAMES, lanes

    for jobs in (1, 2, 3):
        found = lanes(list(NAMES), jobs)
        assert sorted(name for lane in found for name in lane) == sorted(NAMES)
        for lane in found:
            flags = [BY_NAME[name].inductor for name in lane]
            assert flags == sorted(flags), lane  # no stage without inductor after one with it
            assert lane.index("export") < lane.index("aot_inductor") if "aot_inductor" in lane else True
            assert lane.index("compile") < lane.index("compile_fullgraph") if "compile" in lane else True
    assert lanes(list(NAMES), 1) == [["eager", "export", "jit_script", "jit_trace", "onnx_export", "onnxruntime",
                                      "triton", "openvino", "compile", "compile_fullgraph", "aot_inductor"]]


PROBE = """
import json, sys
from pathlib import Path
import torch
from compatcheck.worker import inductor
from torch._inductor import cpu_vec_isa
if sys.argv[1] == "side-by-side":
    inductor._cores = lambda: 5  # as on a machine with cores to spare: every set at once
    inductor.start_probe(Path(sys.argv[2]), "cpu")
    inductor.inductor_ready(Path(sys.argv[2]), "cpu")
print(json.dumps([str(isa) for isa in cpu_vec_isa.valid_vec_isa_list()] + [str(cpu_vec_isa.pick_vec_isa())]))
"""


@pytest.mark.slow
def test_the_probe_made_side_by_side_answers_as_inductors_own(tmp_path):
    import os
    import subprocess
    import sys

    runs = {}
    for how in ("side-by-side", "inductor"):
        cache = tmp_path / how
        runs[how] = subprocess.Popen([sys.executable, "-c", PROBE, how, str(tmp_path)], cwd=ROOT, text=True,
                                     stdout=subprocess.PIPE, env={**os.environ, "TORCHINDUCTOR_CACHE_DIR": str(cache)})
    answers = {how: json.loads(proc.communicate(timeout=300)[0]) for how, proc in runs.items()}
    assert answers["side-by-side"] == answers["inductor"]
    assert (tmp_path / "inductor-setup.lock").exists()


def test_the_default_workers_follow_the_cores_and_memory_caps_any_number():
    from compatcheck import host
    from compatcheck.session import workers

    assert workers.wanted(3) == 3
    assert workers.wanted(None) == max(1, host.cores() // workers.CORES_PER_WORKER)
    gib = 2**30
    assert workers.memory_allows(3, footprint=gib, available=64 * gib) == 3
    assert workers.memory_allows(3, footprint=gib, available=2 * gib) == 2  # one more at twice the first's size
    assert workers.memory_allows(3, footprint=gib, available=gib) == 1  # the first only: the others wait for it
    assert workers.memory_allows(3, footprint=None, available=gib) == 3
    assert workers.available_memory() is None or workers.available_memory() > 0


@pytest.mark.slow
def test_a_lane_memory_holds_back_runs_after_the_first_ends(tmp_path):
    from compatcheck.options import parse
    from compatcheck.session.supervisor import Supervisor

    class NoRoom(Supervisor):
        """A supervisor on a machine whose free memory holds only the first worker."""

        def _loaded(self, footprint):
            super()._loaded(2**60)

    events = []
    options = parse({"stages": ["jit_trace", "onnx_export"]}).run_options()
    supervisor = NoRoom(ROOT / "models" / "convnet.py", "get_model", options, tmp_path, jobs=2,
                        on_event=lambda kind, stage, result: events.append((kind, stage)))
    outcome = supervisor.run()
    assert {name: result.status.value for name, result in outcome.results.items()} == \
        dict.fromkeys(["eager", "jit_trace", "onnx_export"], "pass")
    assert outcome.workers == 2
    first_lane_done = max(events.index(("result", name)) for name, lane in outcome.producers.items() if lane == 0)
    second_lane_began = min(events.index(("start", name)) for name, lane in outcome.producers.items() if lane == 1)
    assert first_lane_done < second_lane_began, events
