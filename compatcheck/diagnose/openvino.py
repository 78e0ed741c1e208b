"""Findings for OpenVINO: the ops its PyTorch frontend could not convert, at the user's lines; the precision
its defaults chose on their own (float16 weights from save_model, bfloat16 inference from the CPU plugin);
a dim the input sets vary in that the converted model holds static."""

from __future__ import annotations

import re
import traceback

import torch

from compatcheck.diagnose.errors import Diagnosed, error_finding
from compatcheck.diagnose.export import headline
from compatcheck.diagnose.found import finding_at, plain
from compatcheck.diagnose.replay import as_eager
from compatcheck.diagnose.torchscript import trace_findings
from compatcheck.recipes import Recipe

# The frontend's report of what it could not convert: "-- No conversion rule found for operations: aten::x, ..."
_UNCONVERTED = re.compile(r"-- (No conversion rule found for operations|Conversion is failed for): (.+)")
# The trace's proof names the first input set that differs, which here may differ by precision alone.
_PROOF = re.compile(r" Input set \d+ proves it: there the trace differs from eager\.")
_TRACING = "Couldn't get TorchScript module by tracing"  # the frontend's torch.jit.trace raised
F32_HINT = (("INFERENCE_PRECISION_HINT", "f32"),)
UNCOMPRESSED = (("compress_to_fp16", False),)
# What undoes the defaults that lower precision: each alone (the cheaper change first), then both.
PRECISION = (Recipe('config={"INFERENCE_PRECISION_HINT": "f32"} (the CPU plugin computes in float32)',
                    session=F32_HINT),
             Recipe("compress_to_fp16=False (save_model keeps the weights in float32)", keywords=UNCOMPRESSED),
             Recipe('compress_to_fp16=False and config={"INFERENCE_PRECISION_HINT": "f32"} (float32 throughout)',
                    keywords=UNCOMPRESSED, session=F32_HINT))
_REWRITE_F32 = 'compiled = openvino.compile_model(path, "CPU", config={"INFERENCE_PRECISION_HINT": "f32"})'
_REWRITE_SAVE = "openvino.save_model(ov_model, path, compress_to_fp16=False)"


def _hint(compiled) -> tuple[str, str]:
    """The precision the CPU plugin computes in ('bf16'), and why in words where it chose it itself."""
    import openvino

    hint = compiled.get_property("INFERENCE_PRECISION_HINT").to_string()
    capabilities = openvino.Core().get_property("CPU", "OPTIMIZATION_CAPABILITIES")
    chosen = {"bf16": "BF16", "f16": "FP16"}.get(hint)
    return hint, (f"its default on this processor: OPTIMIZATION_CAPABILITIES lists {chosen}"
                  if chosen in capabilities else "")


def precision_chosen(compiled) -> str:
    hint, why = _hint(compiled)
    return f"inference precision {hint}{f' ({why})' if why else ''}"


def _unconverted(error: BaseException) -> list[str]:
    """The torch ops the frontend named, in its order; its None constants are what the failed ops left."""
    ops = [op.strip() for _, listed in _UNCONVERTED.findall(str(error)) for op in listed.split(",")]
    named = [op for op in dict.fromkeys(ops) if op and not op.startswith("prim::")]
    return named or [op for op in dict.fromkeys(ops) if op]


def _traced_stacks(ctx, ops: list[str]) -> dict[str, list[list[traceback.FrameSummary]]]:
    """The Python stack (outermost first) of each node of each op, in a trace made as the frontend makes it
    (torch.jit.trace on the sample, not strict); empty where tracing fails."""
    sample = ctx.sample.map(lambda leaf: leaf.cpu())
    try:
        with torch.no_grad():
            traced = torch.jit.trace(ctx.spec.reference_copy().cpu(), sample.args or (), strict=False,
                                     check_trace=False, example_kwarg_inputs=sample.kwargs or None)
    except Exception:
        return {}
    graph = traced.inlined_graph  # its nodes live only as long as this graph
    # A traced node's source range is its stack, innermost frame first.
    return {op: [[traceback.FrameSummary(file, line, "") for file, line in
                  reversed(ctx.spec.user.printed_locations(node.sourceRange()))] for node in graph.findAllNodes(op)]
            for op in ops}


def _conversion_findings(stage: str, ctx, error: BaseException) -> list:
    import openvino

    ops = _unconverted(error)
    if not ops:
        return [error_finding(stage, ctx, error, "conversion-error")]
    stacks = _traced_stacks(ctx, ops)
    version = openvino.__version__.split("-")[0]
    findings, seen = [], set()
    for op in ops:
        message = f"OpenVINO {version}'s PyTorch frontend has no conversion for {op}"
        for stack in stacks.get(op) or [None]:
            finding = finding_at(ctx.spec.user, stage, "unconvertible-op", message, op=op, stack=stack)
            if (op, finding.file, finding.line, finding.library_file, finding.library_line) not in seen:
                seen.add((op, finding.file, finding.line, finding.library_file, finding.library_line))
                findings.append(finding)
    return findings


def _traced(stage: str, ctx, error: BaseException | None) -> list:
    """The tracer's findings, as jit_trace makes them, less what the frontend's own code made it warn of
    (no line of yours or of a library's) and the generic warnings; the trace's proof names the first input
    set that differs, which here may differ by precision alone."""
    return [one.model_copy(update={"message": _PROOF.sub("", one.message)}) for one in trace_findings(stage, ctx, error)
            if one.kind != "trace-warning" and (one.file or one.library_file or not one.kind.startswith("frozen-"))]


class ConversionFailed(Diagnosed):
    """openvino.convert_model's error, restated with the ops it could not convert and the user's lines."""


def restate(stage: str, ctx, error: BaseException) -> BaseException:
    """The frontend's report of unconverted ops names no line, and its tracing failure puts torch.jit.trace's
    own error in the cause: restated with the first op, or the tracer's finding, at the user's line."""
    traced = _TRACING in str(error) and error.__cause__ is not None
    if type(error).__name__ != "OpConversionFailure" and not traced:
        return error
    try:
        findings = _traced(stage, ctx, error.__cause__) if traced else _conversion_findings(stage, ctx, error)
    except Exception:  # a diagnosis that fails must not hide OpenVINO's own error
        return error
    more = f" (and {len(findings) - 1} more)" if len(findings) > 1 else ""
    step = "openvino.convert_model's trace of the model" if traced else "openvino.convert_model"
    return ConversionFailed(headline(step, findings, more), findings)


def _static_dims(stage: str, compiled, dynamic: list[set[int]]) -> list:
    """A dim the input sets vary in (`dynamic`, per input of the converted model) that the input holds static."""
    found = []
    for port, dims in zip(compiled.inputs, dynamic):
        shape = port.get_partial_shape()
        pinned = [dim for dim in sorted(dims) if dim < shape.rank.get_length() and shape[dim].is_static]
        if pinned:
            name = next(iter(port.get_names()), "an input")
            found.append(plain(stage, "dynamic-shape", f"OpenVINO holds dim {', '.join(map(str, pinned))} of "
                               f"{name} static ({shape}): the input sets vary in it, and other sizes are refused"))
    return found


def _lowered(compiled, path: str | None) -> tuple[str, str, bool]:
    """(the plugin's precision, why it chose it, whether save_model stored float16 weights)."""
    import openvino

    hint, why = _hint(compiled)
    model = openvino.Core().read_model(path) if path else None
    weights = model is not None and any(op.get_type_name() == "Constant" and
                                        op.get_output_element_type(0).to_string() == "f16" for op in model.get_ops())
    return hint, why, weights


def _enough(ctx, differing: list[int], undone, hint: str, weights: bool) -> tuple[Recipe | None, Recipe | None, list]:
    """The PRECISION recipes that undo only defaults that lowered something, cheapest first, each run on the
    input sets that differed: (the first that answers them all, the last tried, what that one answered).
    None tried where the model is not float32; a build that fails is no evidence either way."""
    tried, answered = None, []
    candidates = [one for one in PRECISION if (hint != "f32" or not one.session) and (weights or not one.keywords)]
    if ctx.reduced is not None:
        return None, None, []
    for tried in candidates:
        try:
            runner = undone(tried)
            answered = [index for index in differing if as_eager(ctx, index, runner(ctx.spec.input_sets[index]))]
        except Exception:
            return None, None, []
        if answered == differing:
            return tried, tried, answered
    return None, tried, answered


def _precision_findings(stage: str, hint: str, why: str, recipe: Recipe, answered: list[int]) -> list:
    """A finding for each default `recipe` undoes, where it answers the input sets `answered`."""
    sets = ", ".join(str(index + 1) for index in answered)
    plural = len(answered) > 1
    checked = f"with {recipe.what}, input set{'s' if plural else ''} {sets} answer{'' if plural else 's'} as eager does"
    found = []
    if recipe.session:
        found.append(plain(stage, "reduced-precision", f"the CPU plugin computed in {hint}, which the model never "
                           f"asked for{f' ({why})' if why else ''}", rewrite=_REWRITE_F32, checked_by=checked))
    if recipe.keywords:
        found.append(plain(stage, "reduced-precision", "openvino.save_model stored the weights in float16 "
                           "(compress_to_fp16=True, its default): the model computes with rounded weights",
                           rewrite=_REWRITE_SAVE, checked_by=checked))
    return found


def openvino_findings(stage: str, ctx, error: BaseException | None, compiled, dynamic: list[set[int]],
                      path: str | None, undone) -> tuple[list, Recipe | None]:
    """The findings, and the least PRECISION recipe seen to answer every input set that differed (None where
    none did). `undone(recipe)` runs the route with a PRECISION recipe. Where the defaults' answers differ, the
    recipes sort the causes: the input sets they answer differ by precision; what the trace froze is looked
    for only where a difference is left (the frontend traces the model, as jit.trace does)."""
    if compiled is None:
        if isinstance(error, ConversionFailed):
            return error.findings, None
        return ([error_finding(stage, ctx, error, "conversion-error")] if error is not None else []), None
    found = _static_dims(stage, compiled, dynamic)
    differing = [one.index for one in ctx.input_results if not one.ok and one.error is None]
    if not differing:
        return found, None
    hint, why, weights = _lowered(compiled, path)
    enough, tried, answered = _enough(ctx, differing, undone, hint, weights)
    if len(answered) < len(differing):  # an input set that raised is the artifact error's finding (phases.py)
        found += _traced(stage, ctx, None)
    return found + (_precision_findings(stage, hint, why, tried, answered) if answered else []), enough
