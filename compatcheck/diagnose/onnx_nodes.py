"""Map an ONNX node back to the torch code it was exported from: the dynamo exporter keeps the FX
node and its Python stack trace in each node's metadata."""

from __future__ import annotations

import re

import onnx

# Where onnx.checker and onnxruntime name the node an error is about: (op type, node name).
_NAMED_NODE = (
    re.compile(r"running (\w+) node\. Name:'([^']*)'"),  # onnxruntime, at run time
    re.compile(r"of operator \((\w+)\) in node \(([^)]*)\)"),  # onnxruntime, loading an invalid graph
    re.compile(r"op_type:(\w+), node name: ([^)]*)\)"),  # onnx.checker
)


def _metadata(node: onnx.NodeProto, key: str) -> str | None:
    return next((prop.value for prop in node.metadata_props if prop.key == key), None)


def fx_node_name(node: onnx.NodeProto) -> str | None:
    """The name of the FX node an ONNX node was made from ('%linear : ...' -> 'linear')."""
    text = _metadata(node, "pkg.torch.onnx.fx_node") or ""
    return text[1:].split(" ", 1)[0] if text.startswith("%") else None


def torch_op(node: onnx.NodeProto) -> str | None:
    """The aten op an ONNX node was exported from: 'aten.conv1d' from its FX node text."""
    match = re.search(r"target=torch\.ops\.([\w.]+)", _metadata(node, "pkg.torch.onnx.fx_node") or "")
    return match.group(1).removesuffix(".default") if match else None


def named_node(model: onnx.ModelProto, text: str) -> onnx.NodeProto | None:
    """The node an error message names, if the message names one the model has."""
    for pattern in _NAMED_NODE:
        match = pattern.search(text)
        if match:
            return next((n for n in model.graph.node if n.name == match.group(2) and n.op_type == match.group(1)),
                        None)
    return None


def node_finding(stage: str, ctx, node: onnx.NodeProto, kind: str, message: str):
    """A finding about an ONNX node, at the user's line its torch op came from."""
    origin = torch_op(node)
    message += f" (exported from {origin})" if origin else ""
    return ctx.spec.user.finding(stage, kind, message, op=node.op_type,
                                 stack=_metadata(node, "pkg.torch.onnx.stack_trace") or "")
