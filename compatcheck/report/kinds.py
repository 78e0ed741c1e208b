"""Every kind of finding compatcheck makes, declared once: its name, what it means, the stages that make
it and what the user does about it. The report's `findings[].kind` takes these names and no other;
docs/findings.md's table is generated from this one."""

from __future__ import annotations

from dataclasses import dataclass
from typing import Literal

ANY = "any"  # a kind any stage can make


@dataclass(frozen=True)
class Kind:
    name: str
    means: str
    stages: tuple[str, ...]
    do: str  # what the user does about it


KINDS: tuple[Kind, ...] = (
    # The model and eager itself.
    Kind("eager-error", "the model raised in eager on an input set: nothing after it can be checked", ("eager",),
         "fix the model or the input set; the finding is at the line that raised"),
    Kind("training-mode", "a module was left in training mode (dropout, batch-norm statistics) when built",
         ("eager",), "call model.eval() in the factory"),
    Kind("nondeterministic", "outputs change with the seed or the clock by design; they are compared output by output "
         "where the artifact draws torch's numbers, and otherwise not by value",
         (ANY,), "nothing, if the randomness is meant; seed or remove it to have every output checked"),
    Kind("variation-lost", "eager's outputs change with the seed or the clock; the artifact's do not: the draw or "
         "the time was frozen into it when it was built",
         ("compile", "compile_fullgraph", "export", "aot_inductor", "jit_script", "jit_trace", "onnx_export",
          "onnxruntime", "triton"), "pass the random values or the time in as inputs"),
    Kind("state-across-calls", "forward changes state its next call reads (an attribute, a buffer, a list or dict "
         "on the module, a global of the model's own files): eager's second call answers otherwise than its first. "
         "Every stage is compared with eager's first call on a pristine copy; on a stage, its artifact froze the "
         "state and answers like the model's first call forever", (ANY,),
         "pass the state in as an input and return its new value, or keep it outside the model"),
    Kind("numerically-unstable", "eager itself is far from its float64 run at an op: every backend will answer "
         "differently there", ("eager",), "rewrite the op in a stable form (the finding names the op and the line)"),
    Kind("batch-dependence", "one sample's answer depends on the other samples in its batch, as a server batches "
         "requests", ("eager", "triton"), "remove the statistics over the batch (model.eval() for a norm in train "
         "mode); where dim 0 is no batch, declare BATCH_DIM"),
    Kind("device", "with a model on a GPU, something forward makes or keeps on the CPU (a tensor, a "
         "device-to-host copy, a library's question to the data)", ("eager",),
         "make it on the inputs' device (the finding's rewrite)"),
    Kind("input-mutation", "forward writes into an input tensor in place: the caller's data changes", (ANY,),
         "work on a copy (x = x.clone()) or return the result"),
    # Reduced precision (--dtype).
    Kind("overflow", "with --dtype, a value grows past the dtype's range at an op", ("eager",),
         "keep that module in float32 (keep-float32) or rescale"),
    Kind("subnormal", "with --dtype, values fall below the dtype's smallest normal number and lose their digits",
         ("eager",), "keep that module in float32 or rescale"),
    Kind("non-finite", "with --dtype, an output holds NaN or Inf where float64 has none", ("eager",),
         "keep the module that makes it in float32"),
    Kind("keep-float32", "with --dtype, the modules that, kept in float32, bring the model back within its "
         "tolerance: a proven recipe", ("eager",), "keep those modules in float32 (the finding's rewrite)"),
    # Capture and compilation.
    Kind("graph-break", "torch.compile could not capture a construct in one graph", ("compile", "compile_fullgraph"),
         "rewrite the construct (the finding's rewrite) or leave fullgraph off"),
    Kind("compile-error", "torch.compile or AOTInductor raised while compiling", ("compile", "compile_fullgraph",
                                                                                  "aot_inductor"),
         "see the error at the line; often a rewrite of the op it names"),
    Kind("data-dependent-guard", "the code branches on or sizes by a tensor's values, which a captured graph cannot "
         "know", ("compile_fullgraph", "export", "onnx_export"), "express the branch with torch.cond or torch.where, "
         "or check the value with torch._check"),
    Kind("dynamic-shape", "a dimension the inputs vary in is read or pinned as a constant: the artifact fails or "
         "differs at sizes the samples lack", (ANY,), "keep the size symbolic (the finding's rewrite), or declare the "
         "dim in get_dynamic_shapes()"),
    Kind("export-error", "torch.export or torch.onnx.export raised", ("export", "aot_inductor", "onnx_export"),
         "see the error at the line; the findings beside it name the cause"),
    Kind("torch-bug", "a stage failed in a library's call of torch, and that call alone, with arguments of the "
         "same kinds, fails the same way in torch: the cause is torch's, not the library's; the code shown is that "
         "reproduction, as it ran", ("compile", "compile_fullgraph", "export"),
         "report it to PyTorch with the reproduction; build with static sizes meanwhile (the passes-with finding)"),
    Kind("quantized-module", "a stage cannot trace torch.ao eager-mode quantized modules (their weights are packed in "
         "ScriptObjects); the finding says whether the float model, dequantized, passed the stage's capture",
         ("compile_fullgraph", "export", "onnx_export"),
         "export the float model, then quantize what was exported: PT2E (torchao) or onnxruntime's quantize_dynamic"),
    Kind("unregistered-state", "forward assigns a tensor attribute: the exported program does not keep it between "
         "calls", ("export", "aot_inductor", "onnx_export"), "register it as a buffer and write into it"),
    Kind("unexportable-output", "an output's type is one the exporter cannot return (a library's output class, a "
         "non-tensor)", ("export", "aot_inductor", "onnx_export"), "return tensors, or register the class with pytree"),
    # TorchScript.
    Kind("script-signature", "torch.jit.script found no overload of the op that takes the call's arguments: "
         "TorchScript reads the op's schemas, where an argument Python defaults may be required",
         ("jit_script",), "pass the argument the finding names, or call the function the rewrite gives"),
    Kind("unsupported-python", "torch.jit.script meets Python it does not compile", ("jit_script",),
         "rewrite the construct, or leave the stage to jit_trace or export"),
    Kind("library-not-scriptable", "a library's module in the model is not scriptable: the fix is not in your code",
         ("jit_script",), "use jit_trace or torch.export for this model"),
    Kind("container-output", "the model returns a container TorchScript cannot type (a dict of mixed values, a "
         "library's output class)", ("jit_trace", "openvino"), "return a tuple of tensors"),
    Kind("trace-error", "torch.jit.trace raised", ("jit_trace", "openvino"), "see the error at the line"),
    Kind("frozen-control-flow", "the trace froze a branch on a tensor's value: other inputs take the branch input "
         "set 1 took", ("jit_trace", "openvino"), "use torch.where, torch.jit.script for the branch, or torch.export"),
    Kind("frozen-constant", "the trace froze a value computed from a tensor (.item(), .tolist(), NumPy) as a "
         "constant", ("jit_trace", "openvino"), "keep the computation in tensors"),
    Kind("frozen-shape", "the trace unrolled an iteration over a tensor: its length is frozen", ("jit_trace", "openvino"),
         "iterate with tensor ops, or use torch.export"),
    Kind("trace-warning", "the tracer warned that the trace may not generalize", ("jit_trace",),
         "read the warning at the line; the input sets show whether it mattered"),
    # ONNX and the runtimes.
    Kind("unsupported-op", "an op the ONNX exporter has no translation for", ("onnx_export",),
         "the finding's rewrite, a newer opset (--onnx-opset) or the other exporter"),
    Kind("invalid-graph", "onnx.checker or onnxruntime rejects the exported graph", ("onnx_export", "onnxruntime"),
         "see the node it names; often a newer opset or the other exporter"),
    Kind("missing-kernel", "the runtime has no kernel for an op of the graph at this type or on this device",
         ("onnxruntime",), "cast around the op, or choose an execution provider that has it"),
    Kind("runtime-error", "the runtime raised while running the artifact", ("onnxruntime", "triton"),
         "see the node or request it names"),
    Kind("numeric-divergence", "the runtime's answer at a node differs from eager's beyond the tolerance",
         ("onnxruntime",), "the finding names the first node that differs and its line"),
    Kind("runtime-optimizer", "onnxruntime's graph optimizer makes the difference: a lower optimization level "
         "answers every input set as eager does", ("onnxruntime",),
         "the finding's session option (graph_optimization_level); the fused nodes it names are the cause"),
    Kind("export-divergence", "the exported graph means something else than eager computed: ONNX's reference "
         "evaluator differs from eager as onnxruntime does", ("onnxruntime",),
         "the finding names the first node whose value differs and its line: rewrite that op, or the other exporter"),
    Kind("onnx-version", "the ONNX file's IR version or opset is newer than the installed onnxruntime reads",
         ("onnxruntime",), "the finding says which of the two: upgrade onnxruntime, or export at an older opset"),
    Kind("unconvertible-op", "an op OpenVINO's PyTorch frontend has no conversion for", ("openvino",),
         "rewrite the op at the finding's line with ops it converts, or try a newer openvino"),
    Kind("conversion-error", "openvino.convert_model raised: its trace of the model, or a conversion it could not "
         "finish", ("openvino",), "see the error at the line"),
    Kind("reduced-precision", "a default of the route lowered the model's float32 on its own (OpenVINO: "
         "save_model's float16 weights, the CPU plugin's bfloat16 where the processor has it): the answers "
         "differ from eager's by that", ("openvino",),
         "the finding's setting; the passes-with finding says which of them is proven to be enough"),
    Kind("artifact-error", "the artifact, built, raised on an input set or swept size that eager answers: a size or "
         "value was baked into it when it was built; the finding names the error and, where it can be seen, the line",
         (ANY,), "read the error at the line; the stage's recipes (another sample, static sizes) say what gets past it"),
    Kind("output-mismatch", "an output differs from eager's beyond the tolerance: the finding names the output, the "
         "input set and the element where the values part (or the shape each has)", (ANY,),
         "read it beside the stage's other findings; where none names a line, reproduce it with the reproducer"),
    Kind("size-apart", "a line of forward makes a tensor of another size in the artifact than in eager (a resize "
         "that rounds its size otherwise): the finding gives the shape each side computed", ("jit_trace", "jit_script"),
         "compute the size with integer arithmetic on the shape (x.shape[-1] * 29 // 100) and pass size=: both sides "
         "then round alike"),
    Kind("batcher-misfit", "Triton's dynamic batcher and the model's shapes or batch sizes do not fit",
         ("triton",), "the config.pbtxt change the finding says"),
    Kind("triton-load-failure", "the Triton server did not load the model", ("triton",),
         "see the server's reason in the finding"),
    Kind("triton-server-error", "the Triton server failed or could not be reached", ("triton",),
         "see the server's log in the working folder"),
    # The environment and what was proven.
    Kind("broken-environment", "the stage raised because of the environment, not the model: a library could not "
         "import what it needs, or a torch.compile backend breaks an assertion in torch's guard code where "
         "backend='eager' compiles the same model", (ANY,), "the fix the finding names (reinstall or align the library, "
         "or another torch release or backend)"),
    Kind("sandbox-denied", "the stage raised because compatcheck's sandbox refused to make a new file or folder "
         "beside its result cache or key folder (~/.triton, ~/.cache/torch, ...): the model cannot write there during "
         "a run", (ANY,), "create the path the finding names before the run, or run with COMPATCHECK_SANDBOX=off"),
    Kind("passes-with", "a proven recipe: the stage passes, on every input set and swept size, with a setting or "
         "call other than the plain one", (ANY,), "use the call or setting it shows"),
    Kind("proven-rewrite", "`compatcheck fix` rewrote the model's source at the finding's line, ran every stage "
         "again on the rewritten copy and proved it: eager's answers held on every input set and swept size, the "
         "stage now passes and no stage that passed fails", (ANY,),
         "apply the diff it shows (`compatcheck fix --write`)"),
)

NAMES: tuple[str, ...] = tuple(kind.name for kind in KINDS)
BY_NAME = {kind.name: kind for kind in KINDS}
FindingKind = Literal[NAMES]  # the report's type for findings[].kind: the declared names, as its schema's enum
