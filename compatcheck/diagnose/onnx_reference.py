"""A second ONNX oracle: onnx.reference's ReferenceEvaluator, ONNX's own evaluator written from the
standard's op definitions, runs the exported graph. Where it agrees with eager and onnxruntime does
not, onnxruntime computes the graph wrong; where it differs from eager as onnxruntime does, the graph
itself means something else than eager computed: the exporter's translation is wrong.

It runs in numpy, so it is bounded: a graph of more than MOST_NODES nodes, or with an op it has no
implementation of (onnxruntime's com.microsoft ones, say), is not run, and the reason is said."""

from __future__ import annotations

import numpy as np
import onnx

MOST_NODES = 3000  # numpy node by node: beyond this a run takes longer than a diagnosis should


class Unfit(Exception):
    """The reference evaluator cannot run this graph; the message says why, in words."""


def _evaluator(model: onnx.ModelProto):
    from onnx.reference import ReferenceEvaluator

    count = len(model.graph.node)
    if count > MOST_NODES:
        raise Unfit(f"the graph has {count} nodes, more than the {MOST_NODES} it is run on")
    try:
        return ReferenceEvaluator(model)
    except (NotImplementedError, RuntimeError, TypeError, ValueError) as exc:
        raise Unfit(f"onnx.reference cannot load the graph: {str(exc).splitlines()[0]}") from exc


def _feed(evaluator, input_set) -> dict:
    return dict(zip(evaluator.input_names, input_set.arrays_for(list(evaluator.input_names), "the ONNX model")))


def _run(evaluator, feed: dict, intermediate: bool):
    try:
        return evaluator.run(None, feed, intermediate=intermediate)
    except Exception as exc:  # an op's implementation that refuses these values: the oracle has no answer
        raise Unfit(f"onnx.reference raised: {type(exc).__name__}: {str(exc).splitlines()[0] if str(exc) else ''}")


def reference_outputs(model: onnx.ModelProto, input_set) -> list[np.ndarray]:
    """The graph's outputs for `input_set`, computed by the reference evaluator."""
    evaluator = _evaluator(model)
    return list(_run(evaluator, _feed(evaluator, input_set), intermediate=False))


def reference_values(model: onnx.ModelProto, input_set) -> dict[str, np.ndarray]:
    """Every value of the graph (ONNX value name -> array) for `input_set`, computed by the reference evaluator."""
    evaluator = _evaluator(model)
    return dict(_run(evaluator, _feed(evaluator, input_set), intermediate=True))
