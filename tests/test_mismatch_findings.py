"""A mismatch always gets a finding: which output, the input set and the element where the values part,
and where a TorchScript artifact makes a tensor of another size than eager on the way, the line and both
sizes."""

from tests.conftest import run_json

# interpolate's size with recompute_scale_factor: eager floors 100 * 0.29 in float64 (28.999… -> 28), a
# trace in float32 (29.0 -> 29). The first output matches; the second differs in value, not in shape.
RESIZE = """import torch
import torch.nn.functional as F


class Resize(torch.nn.Module):
    def forward(self, x):
        y = F.interpolate(x, scale_factor=0.29, mode="linear", recompute_scale_factor=True)
        return x * 2, y.sum(-1)


def get_model():
    return Resize()


def get_inputs():
    return [torch.randn(1, 2, 100)]
"""


def test_a_resize_that_rounds_otherwise_in_the_trace_names_the_line_both_sizes_and_the_output(tmp_path, write_model):
    model = write_model(RESIZE)
    _, report = run_json(tmp_path, "run", str(model), "--stages", "eager,jit_trace,jit_script")
    stages = {stage["name"]: stage for stage in report["stages"]}
    assert stages["jit_trace"]["status"] == "mismatch" and stages["jit_script"]["status"] == "pass"
    first = stages["jit_trace"]["findings"][0]
    assert (first["kind"], first["line"]) == ("size-apart", 7), first
    assert "shape [1, 2, 28] in eager and [1, 2, 29] in the jit_trace artifact" in first["message"]
    assert "output '1' on input set 1" in first["message"] and " at (0, " in first["message"]
