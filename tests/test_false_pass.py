"""The false-pass corpus (tests/models/false_pass): each model file is a way a stage used to `pass` although
the plainest script refutes it. Every one is run through the real stages its EXPECTED table names; the
stage must not pass, and its reason must name the output and the element. The plain script is run too
(eval, no_grad, the API's defaults, torch.allclose's defaults against eager), to prove each verdict is
right: a corpus model the plain script does not refute would teach a false fail."""

from __future__ import annotations

import json
from collections import Counter
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path

import pytest
import torch

from tests.conftest import ROOT, run_cli
from tests.shared_runs import literal

CORPUS = sorted((ROOT / "tests" / "models" / "false_pass").glob("*.py"))
# What is right must stay right: float noise of every kind, and random outputs beside deterministic ones.
BENIGN = sorted((ROOT / "tests" / "models" / "benign").glob("*.py"))
MECHANISMS = {"random outputs", "an average hides an error", "the user's tolerance", "a relative error under atol",
              "the float64 run's path", "the sweep", "numerically unstable"}


@pytest.fixture(scope="module")
def corpus_runs(tmp_path_factory) -> dict[str, dict]:
    """Every corpus model's report, two runs at a time."""
    def run(path: Path) -> tuple[str, dict]:
        folder = tmp_path_factory.mktemp(path.stem)
        proc = run_cli("run", str(path), "--stages", ",".join(literal(path, "EXPECTED")),
                       *(literal(path, "OPTIONS") or []), "--json", str(folder / "report.json"), "--quiet",
                       "--no-cache")
        assert (folder / "report.json").exists(), proc.stdout + proc.stderr
        return path.stem, json.loads((folder / "report.json").read_text())

    with ThreadPoolExecutor(2) as pool:
        return dict(pool.map(run, [*CORPUS, *BENIGN]))


def test_every_mechanism_has_two_models():
    counts = Counter(literal(path, "MECHANISM") for path in CORPUS)
    assert set(counts) == MECHANISMS and min(counts.values()) >= 2, counts


@pytest.mark.slow
@pytest.mark.parametrize("path", CORPUS, ids=[p.stem for p in CORPUS])
def test_the_stage_does_not_pass_and_says_where(corpus_runs, path):
    stages = {stage["name"]: stage for stage in corpus_runs[path.stem]["stages"]}
    for name, verdict in literal(path, "EXPECTED").items():
        stage = stages[name]
        assert stage["status"] == verdict, (name, stage["reason"])
        for words in literal(path, "REASON")[name]:
            assert words in stage["reason"], (name, words, stage["reason"])


@pytest.mark.slow
@pytest.mark.parametrize("path", BENIGN, ids=[p.stem for p in BENIGN])
def test_what_is_right_still_passes(corpus_runs, path):
    verdicts = {stage["name"]: stage["status"] for stage in corpus_runs[path.stem]["stages"]}
    assert {name: verdicts[name] for name in literal(path, "EXPECTED")} == literal(path, "EXPECTED"), \
        [(stage["name"], stage["reason"]) for stage in corpus_runs[path.stem]["stages"]]


@pytest.mark.slow
def test_a_random_output_and_the_one_beside_it_are_both_compared(corpus_runs):
    """The trace draws torch's numbers under eager's seed, so the draw around the frozen mean is compared by
    value, and so is the mean itself."""
    trace = next(s for s in corpus_runs["random_beside_frozen_branch"]["stages"] if s["name"] == "jit_trace")
    assert [leaf["ok"] for leaf in trace["input_sets"][1]["leaves"]] == [False, False]


@pytest.mark.slow
def test_eager_names_where_it_is_numerically_unstable(corpus_runs):
    """The hand-written layer norm: a finding at the subtraction that cancels, and eager's reason says so."""
    eager = corpus_runs["naive_layer_norm"]["stages"][0]
    found = [f for f in eager["findings"] if f["kind"] == "numerically-unstable"]
    assert found and found[0]["op"] == "aten.sub" and "mean * mean" in found[0]["code"]
    assert "eager itself is far from float64: numerically-unstable on `aten.sub` at naive_layer_norm.py:" in eager["reason"]


# The plain script, per stage: the artifact a deployer builds with the API's defaults, as a function of an
# input set's args.
def _trace(model, sample, path, folder):
    return torch.jit.trace(model, sample)


def _export(model, sample, path, folder):
    return torch.export.export(model, sample).module()


def _onnxruntime(model, sample, path, folder):
    import onnxruntime

    file = folder / f"{path.stem}.onnx"
    legacy = "legacy" in (literal(path, "OPTIONS") or [])
    torch.onnx.export(model, sample, str(file), dynamo=not legacy)
    session = onnxruntime.InferenceSession(str(file), providers=["CPUExecutionProvider"])
    names = [i.name for i in session.get_inputs()]
    return lambda *args: [torch.from_numpy(a) for a in session.run(None, dict(zip(names, (t.detach().numpy() for t in args))))]


PLAIN = {"jit_trace": _trace, "export": _export, "onnxruntime": _onnxruntime}


def _copy(args: tuple) -> tuple:
    return tuple(t.detach().clone().requires_grad_(t.requires_grad) for t in args)


def _leaves(outputs) -> list[torch.Tensor]:
    return [t for t in torch.utils._pytree.tree_leaves(outputs) if isinstance(t, torch.Tensor)]


@pytest.mark.slow
@pytest.mark.parametrize("path", CORPUS, ids=[p.stem for p in CORPUS])
def test_a_plain_script_refutes_a_pass(path, tmp_path):
    """The artifact built as a deployer builds it differs from eager (torch.allclose) on an input set, or on
    fresh values of a size the model file names (PLAIN_SIZE), in an output PLAIN_OUTPUTS names."""
    import runpy

    module = runpy.run_path(str(path))
    torch.manual_seed(0)
    inputs = [one if isinstance(one, tuple) else (one,) for one in module["get_inputs"]()]
    size = literal(path, "PLAIN_SIZE")
    if size:
        inputs.append(tuple(torch.randn(*size) for _ in inputs[0]))
    chosen = literal(path, "PLAIN_OUTPUTS")
    for stage in literal(path, "EXPECTED"):
        built_from, runs = module["get_model"]().eval(), module["get_model"]().eval()
        with torch.no_grad():
            artifact = PLAIN[stage](built_from, _copy(inputs[0]), path, tmp_path)
            agree = []
            for args in inputs:
                torch.manual_seed(0)
                want = _leaves(runs(*args))
                torch.manual_seed(0)
                got = _leaves(artifact(*_copy(args)))
                agree += [torch.allclose(w, g.to(w.dtype)) if w.shape == g.shape else False
                          for i, (w, g) in enumerate(zip(want, got)) if chosen is None or i in chosen]
        assert not all(agree), f"{stage}: the plain script finds the artifact right"
