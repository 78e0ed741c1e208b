"""Findings for torch.onnx.export: what torch.export refused, and every op with no ONNX translation.

The exporter stops at the first op it cannot translate. To list them all, every node of the program
it was translating is looked up in its registry; each node's stack trace gives the line. That program
is the one the failed call decomposed, read from its frame in the error's traceback; where this torch
keeps it elsewhere, the model is captured again as the exporter captures it (torch.export, non-strict).
"""

from __future__ import annotations

import re

from compatcheck.diagnose.catalog import with_rewrites
from compatcheck.diagnose.errors import Diagnosed, error_finding
from compatcheck.diagnose.export import headline, pinned_findings, torch_export_findings
from compatcheck.errors import chain, one_line
from compatcheck.diagnose.found import finding_at

_TRANSLATING = re.compile(r"Error when translating node %(\w+)")
_PASS = re.compile(r"running the '<[\w.]*?(\w+) object")
_LEGACY_OP = re.compile(r"operator '(\w+)::(\w+)'")


class OnnxExportFailed(Diagnosed):
    """The exporter's error, restated with its cause at the user's line."""


def _exporter_error(error: BaseException):
    """The TorchExportError or ConversionError in the chain, if the dynamo exporter raised."""
    from torch.onnx._internal.exporter import _errors

    return next((one for one in chain(error, contexts=False) if isinstance(one, (_errors.TorchExportError, _errors.ConversionError))),
                None)


def _root_cause(error: BaseException) -> BaseException:
    """The innermost exception that caused it: the one saying what is wrong."""
    return list(chain(error, contexts=False))[-1]


def _op_name(target) -> str:
    """'aten.median.dim', or 'aten.erfinv' for a default overload."""
    name = str(target)
    return name.removesuffix(".default")


def _exporter_error_text(error: BaseException) -> str:
    """The messages of the whole cause chain: the node being translated is named in the middle of it."""
    return "\n".join(str(one) for one in chain(error, contexts=False))


def _capture(ctx):
    """The exported program as the exporter captures it, decomposed with its registry."""
    from torch.onnx._internal.exporter import _capture_strategies, _core, _registration

    first = ctx.spec.input_sets[0]
    result = _capture_strategies.TorchExportNonStrictStrategy(verbose=False)(
        ctx.spec.model, first.args, first.kwargs, dynamic_shapes=ctx.spec.dynamic_shapes,
    )
    if result.exported_program is None:
        raise result.exception
    registry = _registration.ONNXRegistry.from_torchlib()
    return _core._prepare_exported_program_for_export(result.exported_program, registry=registry), registry


def _translated(exporter: BaseException):
    """(decomposed program, registry) from the frame of the exporter's export() that raised `exporter`,
    or None: a failed translation leaves what it had decomposed there, so nothing is exported twice."""
    from torch.export import ExportedProgram

    tb = exporter.__traceback__
    while tb is not None:
        names = tb.tb_frame.f_locals
        if isinstance(names.get("decomposed_program"), ExportedProgram) and names.get("registry") is not None:
            return names["decomposed_program"], names["registry"]
        tb = tb.tb_next
    return None


def _untranslatable(program, registry) -> list:
    """Every op node, subgraphs included, that the registry has no ONNX function for."""
    import torch
    from torch.onnx._internal.exporter import _dispatching

    failed = []
    for module in program.graph_module.modules():
        if not isinstance(module, torch.fx.GraphModule):
            continue
        for node in module.graph.nodes:
            if node.op == "call_function" and isinstance(node.target, torch._ops.OpOverload):
                if _dispatching.dispatch(node, registry)[0] is None:
                    failed.append(node)
    return failed


def _node_finding(stage: str, ctx, node, problem: str | None):
    """A finding for one FX node; `problem` is None for 'no ONNX function', else what the function said."""
    import torch

    lowered = _op_name(node.target)
    original = node.meta.get("original_aten")
    op = _op_name(original) if original is not None else lowered
    version = torch.__version__.split("+")[0]
    if problem is None:
        via = f" (it decomposes to {lowered}, which has none either)" if op != lowered else ""
        message = f"no ONNX function for {op} in torch {version}'s exporter{via}"
    else:
        message = f"torch {version}'s ONNX function for {op} refused this call: {problem}"
    return finding_at(ctx.spec.user, stage, "unsupported-op", message, op=op,
                                 stack=node.meta.get("stack_trace") or "")


def _conversion_findings(stage: str, ctx, exporter: BaseException) -> list:
    program, registry = _translated(exporter) or _capture(ctx)
    failing = [(node, None) for node in _untranslatable(program, registry)]
    named = _TRANSLATING.search(_exporter_error_text(exporter))
    nodes = {node.name: node for node in program.graph.nodes}
    if named and named.group(1) in nodes and all(node.name != named.group(1) for node, _ in failing):
        cause = _root_cause(exporter)
        failing.insert(0, (nodes[named.group(1)], str(cause).strip().splitlines()[0]))
    findings, seen = [], set()
    for node, problem in failing:
        finding = _node_finding(stage, ctx, node, problem)
        if (finding.op, finding.file, finding.line) not in seen:
            seen.add((finding.op, finding.file, finding.line))
            findings.append(finding)
    return findings


def _exporter_findings(stage: str, ctx, exporter: BaseException) -> list:
    if type(exporter).__name__ == "TorchExportError":
        return torch_export_findings(stage, ctx, _root_cause(exporter))
    try:
        findings = _conversion_findings(stage, ctx, exporter)
    except Exception:  # capturing again failed where the exporter's capture did not: say what the exporter said
        findings = []
    return findings or [error_finding(stage, ctx, _root_cause(exporter), "unsupported-op")]


def restate(stage: str, ctx, error: BaseException) -> OnnxExportFailed | None:
    """The dynamo exporter's error as an OnnxExportFailed that says what failed where; None for other errors."""
    try:
        exporter = _exporter_error(error)
    except ImportError:  # the exporter's internals moved in this torch: its own error stands
        return None
    if exporter is None:
        return _optimizer_failure(stage, ctx, error)
    try:
        findings = _exporter_findings(stage, ctx, exporter)
    except Exception:  # a diagnosis that fails must not hide the exporter's own error
        return None
    step = "torch.export" if type(exporter).__name__ == "TorchExportError" else "ONNX translation"
    others = list(dict.fromkeys(f.op for f in findings[1:] if f.op and f.op != findings[0].op))
    more = f"; also {', '.join(others)}" if others else ""
    return OnnxExportFailed(headline(step, findings, more), findings)


def _optimizer_failure(stage: str, ctx, error: BaseException) -> OnnxExportFailed | None:
    """The exporter's graph optimizer (onnx_ir passes) raised: said so, with the pass and the errors beneath
    it, where the outer errors name only a pass manager object; None for other errors."""
    errors = list(chain(error, contexts=False))
    passes = [found.group(1) for one in errors if type(one).__name__ == "PassError"
              for found in [_PASS.search(str(one))] if found and found.group(1) != "PassManager"]
    if not passes:
        return None
    beneath = [one_line(one, 200) for one in errors if type(one).__name__ != "PassError"]
    message = f"{passes[-1]} raised {'; beneath it '.join(beneath) or one_line(errors[-1])}"
    findings = [finding_at(ctx.spec.user, stage, "export-error", message)]
    return OnnxExportFailed(headline("the exporter's graph optimizer", findings), findings)


_INCONSISTENT = re.compile(r"(\w+) has inconsistent type tensor\((\w+)\)")


def _invalid_node(stage: str, ctx, error: BaseException) -> list:
    """The saved file failed onnx.checker: a finding for the node it names, at the torch line it came from;
    where it refuses an element type, one per op and type that the graph's opset lacks, with the opset
    that brings it."""
    import onnx

    from compatcheck.diagnose.onnx_nodes import named_node, node_finding, types_out_of_opset

    path = ctx.artifacts.get(stage)
    model = onnx.load(path, load_external_data=False) if path else None
    node = named_node(model, str(error)) if model is not None else None
    if node is None:
        return []
    if "has unsupported type" in str(error):
        refused = types_out_of_opset(model)
        if refused:
            return [node_finding(stage, ctx, one, "invalid-graph", _opset_advice(ctx, model, one, dtype, brings))
                    for one, dtype, brings in refused]
    detail = str(error).split("): ", 1)[-1].strip()
    return [node_finding(stage, ctx, node, "invalid-graph",
                         f"onnx.checker refuses the exported graph: {detail}{_initializer(model, node, detail)}")]


def _opset_advice(ctx, model, node, dtype: str, brings: int | None) -> str:
    import onnx

    opset = next((entry.version for entry in model.opset_import if entry.domain in ("", "ai.onnx")), 0)
    whose = "the exporter's default" if ctx.options.onnx_opset is None else "--onnx-opset"
    text = f"onnx.checker refuses the exported graph: {node.op_type} has no {dtype} at opset {opset} ({whose})"
    if brings is None:
        return f"{text}, nor at any opset up to {onnx.defs.onnx_opset_version()}: compute it in float32 (cast around it)"
    return f"{text}; opset {brings} brings {dtype} {node.op_type}: export with opset_version={brings} (--onnx-opset {brings})"


def _initializer(model, node, detail: str) -> str:
    """Where the checker names an input of the wrong type that is an initializer: which one, and what it holds."""
    import onnx

    wrong = _INCONSISTENT.search(detail)
    if wrong is None:
        return ""
    schema = onnx.defs.get_schema(node.op_type, next((e.version for e in model.opset_import if e.domain in ("", "ai.onnx")), 0))
    position = next((i for i, formal in enumerate(schema.inputs) if formal.name == wrong.group(1)), None)
    name = node.input[position] if position is not None and position < len(node.input) else None
    stored = next((init for init in model.graph.initializer if init.name == name), None)
    if stored is None:
        return ""
    return (f"; {wrong.group(1)} is the initializer {name}, stored as "
            f"{onnx.TensorProto.DataType.Name(stored.data_type).lower()}")


@with_rewrites
def export_findings(stage: str, ctx, error: BaseException | None, program=None) -> list:
    """`program`: the exported program the ONNX graph came from, for a run that failed on an input set."""
    if error is None:
        return pinned_findings(stage, ctx, program)
    if isinstance(error, OnnxExportFailed):
        return error.findings
    invalid = _invalid_node(stage, ctx, error)
    if invalid:
        return invalid
    legacy = _LEGACY_OP.search(str(error))
    op = f"{legacy.group(1)}.{legacy.group(2)}" if legacy else None
    return [error_finding(stage, ctx, error, "unsupported-op" if legacy else "export-error", op=op)]
