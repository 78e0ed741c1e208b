"""Map an ONNX node back to the torch code it was exported from: the dynamo exporter keeps the FX
node and its Python stack trace in each node's metadata."""

from __future__ import annotations

import re

import onnx
from compatcheck.diagnose.found import finding_at

# Where onnx.checker and onnxruntime name the node an error is about: (op type, node name).
_NAMED_NODE = (
    re.compile(r"running (\w+) node\. Name:'([^']*)'"),  # onnxruntime, at run time
    re.compile(r"of operator \((\w+)\) in node \(([^)]*)\)"),  # onnxruntime, loading an invalid graph
    re.compile(r"Optype \((\w+)\) bound to different types .*? in node \(([^)]*)\)"),  # the same, mixed types
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
    return finding_at(ctx.spec.user, stage, kind, message, op=node.op_type,
                                 stack=_metadata(node, "pkg.torch.onnx.stack_trace") or "")


def elem_types(model: onnx.ModelProto) -> dict[str, int]:
    """Value name -> element type (onnx.TensorProto enum) for every value whose type the model states."""
    types = {}
    for info in [*model.graph.input, *model.graph.output, *model.graph.value_info]:
        if info.type.HasField("tensor_type"):
            types[info.name] = info.type.tensor_type.elem_type
    types.update((init.name, init.data_type) for init in model.graph.initializer)
    return types


def type_string(elem_type: int) -> str:
    """onnx's and onnxruntime's spelling of a tensor type: 1 -> 'tensor(float)'."""
    return f"tensor({onnx.TensorProto.DataType.Name(elem_type).lower()})"


def plain(type_string: str) -> str:
    return type_string.removeprefix("tensor(").removesuffix(")")


def bind(schema, node: onnx.NodeProto, types: dict[str, str]) -> dict[str, str]:
    """Type parameter -> actual type, from the node's inputs and outputs (the last formal may be variadic)."""
    params = {constraint.type_param_str for constraint in schema.type_constraints}
    bound = {}
    for formals, names in ((schema.inputs, node.input), (schema.outputs, node.output)):
        for index, name in enumerate(names):
            if not name or not formals or name not in types:
                continue
            param = formals[min(index, len(formals) - 1)].type_str
            if param in params:
                bound.setdefault(param, types[name])
    return bound


def _allows(schema, bound: dict[str, str]) -> bool:
    allowed = {constraint.type_param_str: set(constraint.allowed_type_strs) for constraint in schema.type_constraints}
    return all(t in allowed.get(param, {t}) for param, t in bound.items())


def types_out_of_opset(model: onnx.ModelProto) -> list[tuple[onnx.NodeProto, str, int | None]]:
    """(node, the type its op's schema at the graph's opset does not allow, the first opset whose schema
    allows it or None) for the first node of each op and type: what onnx.checker refuses, all at once."""
    opset = next((entry.version for entry in model.opset_import if entry.domain in ("", "ai.onnx")), 0)
    latest = onnx.defs.onnx_opset_version()
    types = {name: type_string(elem) for name, elem in elem_types(model).items()}
    found, seen = [], set()
    for node in model.graph.node:
        if node.domain not in ("", "ai.onnx"):
            continue
        try:
            schema = onnx.defs.get_schema(node.op_type, opset)
        except onnx.defs.SchemaError:
            continue
        bound = bind(schema, node, types)
        if _allows(schema, bound):
            continue
        allowed = {c.type_param_str: set(c.allowed_type_strs) for c in schema.type_constraints}
        refused = next(plain(t) for param, t in bound.items() if t not in allowed.get(param, {t}))
        if (node.op_type, refused) in seen:
            continue
        seen.add((node.op_type, refused))
        brings = next((version for version in range(opset + 1, latest + 1)
                       if _allows(onnx.defs.get_schema(node.op_type, version), bound)), None)
        found.append((node, refused, brings))
    return found
