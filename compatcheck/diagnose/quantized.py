"""Eager-mode quantized modules (torch.ao's quantize_dynamic and convert) keep their weights packed in
ScriptObjects, which torch.export, a fullgraph capture and the ONNX exporters cannot trace. Where a stage
failed on one, the finding names the quantized modules and op, and the route that does export a
quantized model: export the float model, then quantize the exported program (PT2E, torchao's
prepare_pt2e / convert_pt2e) or the ONNX file (onnxruntime's quantize_dynamic).

That route's first step is checked before it is offered: the modules are dequantized into their float
twins and the stage's capture is run on that float model; for ONNX, onnxruntime's quantize_dynamic is
run on the float file and the result run. The finding says what ran, or that it could not be checked."""

from __future__ import annotations

import copy
import re
import tempfile
import traceback
from pathlib import Path

import torch
from torch import nn

from compatcheck.deadline import within
from compatcheck.diagnose.dynamo import budget
from compatcheck.diagnose.found import finding_at
from compatcheck.errors import chain_text, one_line
from compatcheck.report.model import Finding

STAGES = ("compile_fullgraph", "export", "onnx_export")
_PACKED = re.compile(r"quantized::\w+|PackedParams|__obj_flatten__|as_proxy|ScriptObject|quantized_(?:lstm|gru)")
_OP = re.compile(r"quantized::\w+")
_ROUTE = {
    "compile_fullgraph": "quantize the exported float program instead (PT2E: torchao's prepare_pt2e / convert_pt2e), "
                         "whose quantize/dequantize ops compile in one graph",
    "export": "export the float model, then quantize the exported program (PT2E: torchao's prepare_pt2e / "
              "convert_pt2e with a quantizer for your backend); that program goes on to AOTInductor",
    "onnx_export": "export the float model to ONNX, then quantize the file with onnxruntime.quantization."
                   "quantize_dynamic (its scales are onnxruntime's, so check its accuracy against yours)",
}


def quantized_modules(model) -> list[tuple[str, type]]:
    """(name, class) of each torch.ao quantized module, outermost only."""
    found = []
    for name, module in model.named_modules():
        if type(module).__module__.startswith(("torch.ao.nn.quantized", "torch.nn.quantized")) and \
                not any(name.startswith(f"{outer}.") for outer, _ in found):
            found.append((name, type(module)))
    return found


def quantized_findings(stage: str, ctx, error: BaseException | None) -> list[Finding]:
    """The `quantized-module` finding, first, where `stage` failed on a torch.ao quantized module."""
    if stage not in STAGES or error is None:
        return []
    text = chain_text(error)
    modules = quantized_modules(ctx.spec.model)
    if not modules or not _PACKED.search(text):
        return []
    named = ", ".join(f"{name or 'the model'} ({_public(cls)})" for name, cls in modules[:4]) + (f" and {len(modules) - 4} more" if len(modules) > 4 else "")
    op = _OP.search(text)
    proven, checked = _checked(stage, ctx)
    route = (f"The route that exports a quantized model: {_ROUTE[stage]}." if proven is not False else
             "Dequantized, the float model fails here too, so quantizing after export would not get "
             "this stage through on its own: the other findings name that cause.")
    message = (f"{stage} cannot trace eager-mode quantized modules: {named} keep their weights packed in "
               f"ScriptObjects{f' and run {op.group()}' if op else ''}. {route}")
    return [finding_at(ctx.spec.user, stage, "quantized-module", message, stack=_called_from(ctx, modules[0][0]),
                       op=op.group() if op else _public(modules[0][1])).model_copy(update={"checked_by": checked})]


def _public(cls: type) -> str:
    """The class by its public name: torch.ao.nn.quantized.dynamic.Linear."""
    return f"{cls.__module__.split('.modules')[0]}.{cls.__name__}"


def _called_from(ctx, name: str) -> list:
    """The Python stack where eager calls the quantized module `name` on input set 1."""
    seen, model = [], copy.deepcopy(ctx.spec.model)
    model.get_submodule(name).register_forward_pre_hook(lambda *_: seen.append(traceback.extract_stack()))
    try:
        ctx.eager(ctx.spec.input_sets[0], model)
    except Exception:  # eager passed on this set already; without the stack the finding points at no line
        pass
    return seen[0] if seen else []


def _checked(stage: str, ctx) -> tuple[bool | None, str]:
    """Whether the route's first step ran (None: not checked), and what ran, in words."""
    try:
        float_model = dequantized(ctx.spec.model)
    except _NoTwin as exc:
        return None, f"not checked: {exc} has no float twin compatcheck can build"
    sample = ctx.spec.input_sets[0]
    try:
        with within(budget(ctx)) as timer, torch.no_grad():
            said = _CHECKS[stage](float_model, sample, ctx.spec.dynamic_shapes)
        if timer.expired:
            return None, "not checked: the float model's capture ran past the diagnosis budget"
    except Exception as exc:  # the float model fails too: the route is not proven, and the finding says so
        return False, f"the float model (the modules dequantized) fails here too: {one_line(exc, 160)}"
    return True, said


def _fullgraph(model, sample, shapes) -> str:
    torch._dynamo.reset()
    torch.compile(model, fullgraph=True)(*sample.args, **sample.kwargs)
    torch._dynamo.reset()
    return "the float model (the modules dequantized) compiled with fullgraph=True on input set 1"


def _export(model, sample, shapes) -> str:
    torch.export.export(model, tuple(sample.args), sample.kwargs or None, dynamic_shapes=shapes, strict=False)
    return "the float model (the modules dequantized) exported with torch.export on input set 1"


def _onnx(model, sample, shapes) -> str:
    import onnxruntime
    from onnxruntime.quantization import quantize_dynamic

    with tempfile.TemporaryDirectory() as folder:
        plain_file, quantized_file = Path(folder, "float.onnx"), Path(folder, "quantized.onnx")
        torch.onnx.export(model, tuple(sample.args), str(plain_file), kwargs=sample.kwargs or None, dynamo=True,
                          dynamic_shapes=shapes)
        quantize_dynamic(str(plain_file), str(quantized_file))
        session = onnxruntime.InferenceSession(str(quantized_file), providers=["CPUExecutionProvider"])
        flat = [leaf for leaf in torch.utils._pytree.tree_leaves((sample.args, sample.kwargs))
                if isinstance(leaf, torch.Tensor)]
        session.run(None, {one.name: value.numpy() for one, value in zip(session.get_inputs(), flat)})
    return ("the float model (the modules dequantized) exported to ONNX, onnxruntime's quantize_dynamic quantized "
            "it, and onnxruntime ran it on input set 1")


_CHECKS = {"compile_fullgraph": _fullgraph, "export": _export, "onnx_export": _onnx}


class _NoTwin(Exception):
    """A quantized module with no float twin built here (a static quantized conv with fused ReLU, say)."""


def dequantized(model) -> nn.Module:
    """A float copy of `model`: each dynamically quantized Linear, LSTM or GRU, or static Linear, made float
    with its weights dequantized; static models' quantize and dequantize stubs become identities."""
    model = copy.deepcopy(model)
    for name, cls in quantized_modules(model):
        twin = _twin(model.get_submodule(name)) if name else None
        if twin is None:
            raise _NoTwin(f"{name or 'the model'} ({cls.__name__})")
        parent, _, attribute = name.rpartition(".")
        setattr(model.get_submodule(parent), attribute, twin)
    return model


def _twin(module) -> nn.Module | None:
    name = type(module).__name__
    if name in ("Quantize", "DeQuantize"):
        return nn.Identity()
    if name == "Linear":
        twin = nn.Linear(module.in_features, module.out_features, bias=module.bias() is not None)
        twin.weight.data = module.weight().dequantize()
        if module.bias() is not None:
            twin.bias.data = module.bias().detach().clone()
        return twin
    if name in ("LSTM", "GRU") and hasattr(module, "_weight_bias"):
        twin = getattr(nn, name)(module.input_size, module.hidden_size, module.num_layers, bias=module.bias,
                                 batch_first=module.batch_first, dropout=float(module.dropout),
                                 bidirectional=module.bidirectional)
        for group in module._weight_bias().values():
            for key, value in group.items():
                getattr(twin, key).data = value.dequantize() if value.is_quantized else value.detach().clone()
        return twin
    return None
