"""Randomness by design is named at the op that draws: the first op whose output differs between two
differently seeded eager runs, not the first op torch tags as seeded."""

from tests.conftest import ROOT, run_json

MODEL = ROOT / "tests" / "models" / "draw_after_attention.py"


def test_the_draw_after_attention_is_named_not_the_attention(tmp_path):
    _, report = run_json(tmp_path, "run", str(MODEL), "--stages", "eager", "--no-cache")
    eager = report["stages"][0]
    assert eager["status"] == "pass", eager["reason"]
    found = [f for f in eager["findings"] if f["kind"] == "nondeterministic"]
    assert [(f["op"], f["code"]) for f in found] == [("aten.randn_like", "return x + 0.1 * torch.randn_like(x)")]
    assert "its output differs under seeds 0 and 1" in found[0]["message"]
