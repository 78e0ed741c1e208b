"""Where forward writes into its own input: a hazard, since a traced or exported graph works on a
copy while eager changes the caller's tensor."""

from __future__ import annotations

import inspect
import traceback

import torch
from torch.utils._python_dispatch import TorchDispatchMode

from compatcheck.report.model import Finding
from compatcheck.diagnose.found import finding_at


class _InputWrites(TorchDispatchMode):
    """Records the first op that writes into storage owned by one of `inputs`, with the Python stack."""

    def __init__(self, inputs: dict[int, str]):
        super().__init__()
        self.inputs = inputs  # storage pointer -> input name
        self.found: tuple[str, str, list] | None = None

    def __torch_dispatch__(self, func, types, args=(), kwargs=None):
        kwargs = kwargs or {}
        if self.found is None:
            values = dict(zip((a.name for a in func._schema.arguments), args)) | kwargs
            for argument in func._schema.arguments:
                value = values.get(argument.name)
                if argument.alias_info is not None and argument.alias_info.is_write and \
                        isinstance(value, torch.Tensor):
                    name = self.inputs.get(value.untyped_storage().data_ptr())
                    if name is not None:
                        self.found = (func._schema.name.split("::")[-1], name, traceback.extract_stack()[:-1])
                        break
        return func(*args, **kwargs)


def _input_names(ctx, input_set) -> dict[int, str]:
    try:
        parameters = list(inspect.signature(ctx.spec.model.forward).parameters)
    except (TypeError, ValueError):
        parameters = []
    names = {}
    for position, value in enumerate(input_set.args):
        label = parameters[position] if position < len(parameters) else f"argument {position + 1}"
        for leaf in torch.utils._pytree.tree_leaves(value):
            names[leaf.untyped_storage().data_ptr()] = label
    for key, value in input_set.kwargs.items():
        for leaf in torch.utils._pytree.tree_leaves(value):
            names[leaf.untyped_storage().data_ptr()] = key
    return names


def input_mutation(ctx, stage: str) -> list[Finding]:
    """A finding at the line that first changes an input in place, if eager saw one change."""
    if not ctx.mutated_inputs:
        return []
    index = ctx.mutated_inputs[0]
    input_set = ctx.spec.input_sets[index]
    recorder = _InputWrites(_input_names(ctx, input_set))
    with torch.no_grad(), recorder:
        ctx.spec.model(*input_set.args, **input_set.kwargs)
    op, name, stack = recorder.found or ("an in-place op", "an input", [])
    sets = ("input sets " if len(ctx.mutated_inputs) > 1 else "input set ") + \
        ", ".join(str(i + 1) for i in ctx.mutated_inputs)
    return [finding_at(ctx.spec.user,
        stage, "input-mutation",
        f"forward changes its input {name} in place ({op}, {sets}); a traced or exported graph "
        "works on a copy, so a caller that reuses the tensor sees other values than in eager. compatcheck "
        "gave every run its own copy of the inputs",
        location=ctx.spec.user.innermost(stack), op=op,
        rewrite=f"{name} = {name}.clone()  # at the top of forward, so the in-place op changes a copy"
        if name.isidentifier() else "clone the input at the top of forward, so the in-place op changes a copy",
    )]
