"""The reason is the line of the error that names its cause, for each error family whose first line does
not (compatcheck/causes.py). The oracle is a table of real errors raised by the real libraries, and the
substring the reason must hold; one row runs the whole command, as a user would."""

import io

import numpy as np
import onnxruntime
import pytest
import torch
from onnx import TensorProto, helper

from compatcheck.errors import one_line
from tests.conftest import ROOT, run_json
from tests.test_verdict_causes import load


class Norm(torch.nn.Module):
    def forward(self, h):
        return h / h.norm(dim=-1, keepdim=True)


class FrozenBatch(torch.nn.Module):
    def forward(self, x):
        return x.view(int(x.shape[0]), 2, -1)


def _script_norm():
    torch.jit.script(Norm())


def _interpreter():
    with pytest.warns(torch.jit.TracerWarning):
        traced = torch.jit.trace(FrozenBatch(), torch.randn(2, 4))
    traced(torch.randn(3, 5))


def _onnxruntime_reshape():
    graph = helper.make_graph(
        [helper.make_node("Reshape", ["x", "shape"], ["y"])], "g",
        [helper.make_tensor_value_info("x", TensorProto.FLOAT, ["n", 4])],
        [helper.make_tensor_value_info("y", TensorProto.FLOAT, None)],
        [helper.make_tensor("shape", TensorProto.INT64, [2], [2, 4])])
    model = helper.make_model(graph, opset_imports=[helper.make_opsetid("", 17)])
    model.ir_version = 8
    session = onnxruntime.InferenceSession(model.SerializeToString(), providers=["CPUExecutionProvider"])
    session.run(None, {"x": np.zeros((3, 4), np.float32)})


def _numpy_in_script():
    class Numpy(torch.nn.Module):
        def forward(self, x):
            return torch.from_numpy(np.sqrt(x.numpy()))

    torch.jit.script(Numpy())


class SizedByInt(torch.nn.Module):
    def forward(self, x):
        return x.reshape(int(x.shape[0]) * x.shape[1])


class Probit(torch.nn.Module):
    def forward(self, x):
        return torch.special.erfinv(x)


class Branch(torch.nn.Module):
    def forward(self, x):
        return x if x.sum() > 0 else -x


def _trace_untyped():
    module = load(ROOT / "tests" / "models" / "dataclass_output.py")
    torch.jit.trace(module.get_model(), module.get_inputs()[0])


def _export_constraint():
    torch.export.export(SizedByInt(), (torch.randn(2, 3),), dynamic_shapes=({0: torch.export.Dim("batch")},))


def _export_conflict():
    torch.export.export(SizedByInt(), (torch.randn(1, 3),), dynamic_shapes=({0: torch.export.Dim.DYNAMIC},))


def _onnx_translation():
    torch.onnx.export(Probit(), (torch.rand(3),), io.BytesIO(), dynamo=True)


def _dynamo_unsupported():
    torch._dynamo.reset()
    torch.compile(Branch(), fullgraph=True, backend="eager")(torch.randn(2))


# (family, what raises it, what the reason must hold, what it must not start with)
CAUSES = [
    ("TorchScript frontend, no overload", _script_norm, "Argument p not provided", "RuntimeError: Arguments for call are not valid.\n"),
    ("TorchScript interpreter", _interpreter, "shape '[2, 2, -1]' is invalid for input of size 15",
     "RuntimeError: The following operation failed"),
    ("onnxruntime status", _onnxruntime_reshape, "Status Message: input_shape_size == requested_shape_size was false",
     "/onnxruntime_src"),
    ("TorchScript frontend, numpy", _numpy_in_script, "TorchScript cannot compile a call of numpy", "TypeError: cannot"),
    ("torch.export constraint violation", _export_constraint,
     "Constraints violated (batch): You marked batch as dynamic but your code specialized it", "UserError: Constraints "
     "violated (batch)! For more"),
    ("torch.export conflict with the declared dims", _export_conflict,
     "Received user-specified dim hint Dim.DYNAMIC", "ValueError: Found the following conflicts"),
    ("ONNX exporter translation", _onnx_translation, "No ONNX function found for <OpOverload(op='prims.erf_inv'",
     "ConversionError: Failed to convert"),
    ("jit.trace of an untyped output", _trace_untyped, "but instead got value of type Result", "RuntimeError: Tracer "
     "cannot infer type of Result("),
    ("dynamo Unsupported", _dynamo_unsupported, "Data-dependent branching", "Unsupported: Explanation"),
]


@pytest.mark.parametrize("family, raises, cause, not_first", CAUSES, ids=[row[0] for row in CAUSES])
def test_the_reason_is_the_line_that_names_the_cause(family, raises, cause, not_first):
    with pytest.raises(Exception) as raised:
        raises()
    reason = one_line(raised.value)
    assert cause in reason and not reason.startswith(not_first), reason
    assert "/onnxruntime_src/" not in reason and "Traceback of TorchScript" not in reason


def test_the_stage_reason_names_the_missing_argument_and_the_finding_the_rewrite(tmp_path):
    model = tmp_path / "norm_model.py"
    model.write_text("import torch\n\n\nclass Norm(torch.nn.Module):\n    def forward(self, h):\n"
                     "        return h / h.norm(dim=-1, keepdim=True)\n\n\n"
                     "def get_model():\n    return Norm()\n\n\ndef get_inputs():\n    return [torch.randn(2, 4)]\n")
    _, report = run_json(tmp_path, "run", str(model), "--stages", "eager,jit_script", "--no-cache")
    script = next(stage for stage in report["stages"] if stage["name"] == "jit_script")
    assert script["status"] == "fail" and "Argument p not provided" in script["reason"], script
    assert "vector_norm" in (script["findings"][0]["rewrite"] or ""), script["findings"]
