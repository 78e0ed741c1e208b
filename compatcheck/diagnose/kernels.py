"""Pre-flight: every node of an ONNX model against onnxruntime's registered kernels.

onnxruntime registers a kernel per op, domain, opset range, provider and tensor types; loading a
model stops at the first node none of the session's providers has a kernel for. Checking every
node against the registry lists all of them at once. A node the registry lacks is then loaded
alone, because onnxruntime may still run it: it casts float16 to float32 on CPU and expands ops
that are ONNX functions (Gelu, for one) into ops it does have.
"""

from __future__ import annotations

import functools
from dataclasses import dataclass, field

import onnx

from compatcheck.diagnose.onnx_nodes import bind, elem_types, plain, type_string
from compatcheck.onnxruntime_session import session_options


@dataclass
class Blocker:
    node: onnx.NodeProto
    since: int  # the opset version of the op's schema the node uses
    types: dict[str, str]  # type parameter -> the node's element type, e.g. {"T": "double"}
    available: dict[str, list[str]] = field(default_factory=dict)  # type parameter -> types with a kernel
    detail: str = ""  # what onnxruntime said when the node was loaded alone


@functools.lru_cache(maxsize=1)
def _registry() -> dict[tuple[str, str], list]:
    from onnxruntime.capi import _pybind_state

    kernels: dict[tuple[str, str], list] = {}
    for kernel in _pybind_state.get_all_opkernel_def():
        kernels.setdefault((kernel.domain or "", kernel.op_name), []).append(kernel)
    return kernels


def _loads_alone(model: onnx.ModelProto, node: onnx.NodeProto, elems: dict[str, int], providers: tuple) -> str | None:
    """None if onnxruntime loads the node on its own, else what it said."""
    import onnxruntime

    def value(name):
        if name not in elems:
            return onnx.ValueInfoProto(name=name)
        return onnx.helper.make_tensor_value_info(name, elems[name], None)

    graph = onnx.helper.make_graph([node], "preflight", [value(n) for n in node.input if n],
                                   [value(n) for n in node.output if n])
    alone = onnx.helper.make_model(graph, opset_imports=model.opset_import, ir_version=model.ir_version)
    try:
        onnxruntime.InferenceSession(alone.SerializeToString(), session_options(log_severity_level=4),
                                     providers=list(providers))
    except Exception as exc:
        return str(exc).strip()
    return None


def blockers(model: onnx.ModelProto, providers: list[str]) -> list[Blocker]:
    """The nodes of the main graph that no provider in `providers` has a kernel for."""
    opsets = {entry.domain or "": entry.version for entry in model.opset_import}
    opsets.setdefault("", opsets.get("ai.onnx", 0))
    elems = elem_types(model)
    types = {name: type_string(elem) for name, elem in elems.items()}
    registry = _registry()
    found, verdicts = [], {}
    for node in model.graph.node:
        domain = node.domain if node.domain not in ("", "ai.onnx") else ""
        try:
            schema = onnx.defs.get_schema(node.op_type, opsets.get(domain, 0), domain)
        except onnx.defs.SchemaError:
            continue  # an op onnx does not describe (a runtime's own domain): nothing to check against
        bound = bind(schema, node, types)
        kernels = [k for k in registry.get((domain, node.op_type), []) if k.provider in providers
                   and k.version_range[0] <= schema.since_version <= k.version_range[1]]
        if any(all(bound.get(param) in allowed for param, allowed in k.type_constraints.items() if param in bound)
               for k in kernels):
            continue
        key = (domain, node.op_type, schema.since_version, tuple(sorted(bound.items())))
        if key not in verdicts:
            verdicts[key] = _loads_alone(model, node, elems, tuple(providers))
        if verdicts[key] is None:
            continue
        available: dict[str, list[str]] = {}
        for kernel in kernels:
            for param, allowed in kernel.type_constraints.items():
                available.setdefault(param, [])
                available[param] += [plain(t) for t in allowed if plain(t) not in available[param]]
        types_used = {param: plain(t) for param, t in bound.items()}
        found.append(Blocker(node, schema.since_version, types_used, available, verdicts[key]))
    return found
