"""The first op where the ONNX graph computes something else than the program it was exported from.

An export can pass the checker and run, and still be wrong. To find where, the model is exported
again (the same call, so the ONNX values carry the names of the FX nodes they come from), every
intermediate value is computed by onnxruntime (each made a graph output) or by the reference
evaluator, the exported program is run node by node in torch, and the values are compared in graph
order: the first one that differs names the FX node, and its stack trace the user's line.

torch.onnx.verification.verify_onnx_program compares every value too, but always in onnxruntime:
it cannot tell onnxruntime's error from the exporter's. Here the values come from either oracle
(`values_of`), so a node onnx.reference computes otherwise than eager blames the exporter.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Callable

import numpy as np
import onnx
import torch
from torch.utils import _pytree as pytree

from compatcheck.compare import compare_leaf
from compatcheck.diagnose.onnx_nodes import fx_node_name
from compatcheck.onnxruntime_session import feeds, session_options


@dataclass
class Divergence:
    fx_node: torch.fx.Node
    onnx_ops: list[str]  # the ONNX ops the exporter made of that node, in graph order
    max_abs_error: float | None
    problem: str


def _export(ctx):
    first = ctx.spec.input_sets[0]
    return torch.onnx.export(
        ctx.spec.model, first.args, kwargs=first.kwargs or None, dynamic_shapes=ctx.spec.dynamic_shapes,
        dynamo=True, opset_version=ctx.options.onnx_opset, verbose=False,
    )


def _torch_values(program, input_set) -> dict[str, torch.Tensor]:
    """FX node name -> its value, running the exported program on the input set."""
    values = {}

    class Recorder(torch.fx.Interpreter):
        def run_node(self, node):
            out = super().run_node(node)
            if isinstance(out, torch.Tensor):
                values[node.name] = out
            return out

    with torch.no_grad():
        Recorder(program.module()).run(*pytree.tree_leaves((input_set.args, input_set.kwargs)))
    return values


def _onnx_values(model: onnx.ModelProto, input_set, providers: list[str]) -> dict[str, np.ndarray]:
    """ONNX value name -> its value in onnxruntime, every node output made a graph output."""
    import onnxruntime

    model = onnx.ModelProto.FromString(model.SerializeToString())
    outputs = {output.name for output in model.graph.output}
    for node in model.graph.node:
        for name in node.output:
            if name and name not in outputs:
                model.graph.output.append(onnx.ValueInfoProto(name=name))
                outputs.add(name)
    session = onnxruntime.InferenceSession(model.SerializeToString(), session_options(), providers=providers)
    names = [output.name for output in session.get_outputs()]
    return dict(zip(names, session.run(None, feeds(session, input_set))))


def runtime_values(providers: list[str]) -> Callable[[onnx.ModelProto, object], dict[str, np.ndarray]]:
    """Every value of a graph computed by onnxruntime with `providers`, for first_divergence."""
    return lambda model, input_set: _onnx_values(model, input_set, providers)


def first_divergence(ctx, index: int, values_of) -> Divergence | None:
    """Where input set `index` first differs between the ONNX values `values_of(model, input_set)` gives
    (runtime_values, or onnx_reference.reference_values) and the exported program."""
    program = _export(ctx)
    return diverging(program.exported_program, program.model_proto, ctx.spec.input_sets[index], ctx.tolerances,
                     values_of)


def diverging(program, model: onnx.ModelProto, input_set, tolerances, values_of) -> Divergence | None:
    """The first value of `model`, in graph order, that differs from the value of the FX node of `program`
    it carries the name of, on `input_set`; None where every one matches."""
    expected = _torch_values(program, input_set)
    actual = values_of(model, input_set)
    fx_nodes = {node.name: node for node in program.graph.nodes}
    for node in model.graph.node:
        for name in node.output:
            if name not in expected or name not in actual or name not in fx_nodes:
                continue
            want = expected[name].detach().cpu()
            atol, rtol = tolerances.resolve("", want.dtype)  # the model-wide tolerance: FX names are not output names
            leaf = compare_leaf(name, want, actual[name], atol, rtol)
            if not leaf.ok:
                ops = [n.op_type for n in model.graph.node if fx_node_name(n) == name]
                return Divergence(fx_nodes[name], list(dict.fromkeys(ops)) or [node.op_type],
                                  leaf.max_abs_error, leaf.problem or "differs")
    return None
