"""Batch independence, in eager: each sample's answer alone against its answer inside a batch of the
user's samples, as a server's dynamic batcher packs requests from different users into one batch.

Checked for a model whose every tensor input has a dynamic batch dimension, on at most MAX_SAMPLES rows
of the input sets: dim 0, or the one the model file's BATCH_DIM names per input (None: an input every
sample shares, or a model with no batch at all). Samples of the same shape are concatenated into one
batch; where the model file's PADDING names every input whose sizes differ between samples, the shorter
ones are padded at the end of those dims to the longest, and each answer is cut back to the sample's own
sizes. A
difference counts only beyond the fp64-adjudicated tolerance of compare_outputs: CPU matrix kernels
legitimately differ by ~1e-6 across batch sizes. Where an answer differs, the sample alone and the batch
run again under a dispatch mode that records every aten op: the first op whose output, cut to the
sample, differs names the op, and its Python stack the user's line.

A model whose outputs vary between runs (random, the clock, state kept between calls) is not checked;
ragged batching and the sequence batching of stateful models are out of scope.
"""

from __future__ import annotations

import re
import sys
import traceback
from dataclasses import dataclass

import torch
from torch.utils import _pytree as pytree
from torch.utils._python_dispatch import TorchDispatchMode

from compatcheck.compare import compare_leaf, compare_outputs, flatten
from compatcheck.report.model import Finding
from compatcheck.spec import InputSet, dynamic_dims, resolve_batch_dims
from compatcheck.variation import SEEDS, reseed
from compatcheck.diagnose.found import finding_at

KIND = "batch-dependence"
MAX_SAMPLES = 16  # each is one more forward call, alone
# Ops whose output holds whatever memory held: never a difference of the model's.
_UNINITIALISED = {"empty", "empty_like", "empty_strided", "new_empty", "new_empty_strided"}
_TRAINING_TRUE = re.compile(r"\btraining\s*=\s*True\b")
_NO_RUNNING_STATS = re.compile(r",?\s*track_running_stats\s*=\s*False")
_CONSEQUENCE = ("a server's dynamic batcher packs requests from different users into one batch, so their "
                "answers would depend on each other")


@dataclass
class Sample:
    input_set: int
    row: int
    inputs: InputSet
    dims: list[int | None]  # per tensor input, its batch dim; None for one every sample shares

    def describe(self) -> str:
        return f"input set {self.input_set + 1}, sample {self.row + 1}"


def _batch_dims(spec) -> list[int | None]:
    """Per tensor input, the dim its batch is on; none at all where no input has one, or where one's is
    not dynamic (a model exported at one batch size is served at that size alone)."""
    dims = resolve_batch_dims(spec.batch_dim, spec.given_inputs[0].names or [])
    dynamic = dynamic_dims(spec)
    if all(dim is None for dim in dims) or any(dim is not None and dim not in one for dim, one in zip(dims, dynamic)):
        return []
    return dims


def _per_input(one: InputSet, dims: list[int | None], fn) -> InputSet:
    """`one` with fn(tensor, its batch dim) for every tensor: map visits them in leaves() order."""
    order = iter(dims)
    return one.map(lambda leaf: fn(leaf, next(order)))


def _rows(one: InputSet, dims: list[int | None]) -> int:
    """The batch size every batched tensor of the input set shares (0 where they share none)."""
    sizes = {leaf.shape[dim] for leaf, dim in zip(one.leaves(), dims) if dim is not None}
    return sizes.pop() if len(sizes) == 1 else 0


def samples(spec) -> list[Sample]:
    """Up to MAX_SAMPLES rows of the input sets, taken from every set in turn; none where not every
    batched tensor input has a dynamic batch dimension."""
    dims = _batch_dims(spec)
    if not dims:
        return []
    sets = spec.input_sets
    rows = [_rows(one, dims) for one in sets]
    found = []
    for row in range(max(rows, default=0)):
        for index, one in enumerate(sets):
            if row < rows[index] and len(found) < MAX_SAMPLES:
                sliced = _per_input(one, dims, lambda t, dim, row=row: t if dim is None else t.narrow(dim, row, 1))
                found.append(Sample(index, row, sliced, dims))
    return found


def _groups(found: list[Sample], padding: dict) -> list[list[Sample]]:
    """Samples that can share a batch: the same shapes but in the batch dim (and in the dims of the inputs
    PADDING names), and the same inputs that every sample shares (those of one input set)."""
    groups: dict[tuple, list[Sample]] = {}
    for sample in found:
        names = sample.inputs.names or []
        key = tuple((str(leaf.dtype), ("shared", sample.input_set) if dim is None else leaf.dim() if name in padding
                     else tuple(size for d, size in enumerate(leaf.shape) if d != dim))
                    for name, leaf, dim in zip(names, sample.inputs.leaves(), sample.dims))
        groups.setdefault(key, []).append(sample)
    return [group for group in groups.values() if len(group) > 1]


def _concatenated(column: list[torch.Tensor], pad, dim: int | None) -> torch.Tensor:
    if dim is None:
        return column[0]  # an input every sample shares
    if pad is None:
        return torch.cat(column, dim)
    shape = [len(column) if d == dim else max(leaf.shape[d] for leaf in column) for d in range(column[0].dim())]
    batch = torch.full(shape, pad, dtype=column[0].dtype)
    for row, leaf in enumerate(column):
        batch[tuple(slice(row, row + 1) if d == dim else slice(0, size) for d, size in enumerate(leaf.shape))] = leaf
    return batch


def batch_of(group: list[Sample], padding: dict) -> InputSet:
    """The samples concatenated along their batch dim (padded at the end where PADDING says how)."""
    flats = [pytree.tree_flatten((sample.inputs.args, sample.inputs.kwargs)) for sample in group]
    names, dims = iter(group[0].inputs.names or []), iter(group[0].dims)
    leaves = []
    for position, first in enumerate(flats[0][0]):
        if isinstance(first, torch.Tensor):
            leaves.append(_concatenated([flat[position] for flat, _ in flats], padding.get(next(names, None)),
                                        next(dims)))
        else:
            leaves.append(first)
    args, kwargs = pytree.tree_unflatten(leaves, flats[0][1])
    return InputSet(args, kwargs, group[0].inputs.names)


@dataclass
class Place:
    """Where a sample sits in its batch: its position among `count` samples, whether they were padded,
    and the dim the inputs' batch is on, which an output that scales in several dims has its batch on."""

    position: int
    count: int
    padded: bool
    dim: int = 0

    @classmethod
    def of(cls, position: int, count: int, padded: bool, dims: list[int | None]) -> "Place":
        batched = {dim for dim in dims if dim is not None}
        return cls(position, count, padded, batched.pop() if len(batched) == 1 else 0)

    def cut(self, alone: torch.Tensor, batched: torch.Tensor):
        """The part of a batched tensor that belongs to the sample, in the sample's own sizes; the whole
        tensor where it has no batch dim; None where the shapes do not say which part."""
        if alone.dim() != batched.dim():
            return None
        if alone.shape == batched.shape:
            return batched
        scaled = [d for d in range(alone.dim()) if batched.shape[d] == self.count * alone.shape[d] != alone.shape[d]]
        batch = self.dim if self.dim in scaled else scaled[0] if len(scaled) == 1 else None
        if batch is None:
            return None
        part = batched.narrow(batch, self.position * alone.shape[batch], alone.shape[batch])
        for d in range(alone.dim()):
            if part.shape[d] != alone.shape[d]:
                if not self.padded or part.shape[d] < alone.shape[d]:
                    return None
                part = part.narrow(d, 0, alone.shape[d])  # padded at the end: the sample's own values come first
        return part


def _run(model, inputs: InputSet):
    reseed(SEEDS[0])
    with torch.no_grad():
        return model(*inputs.args, **inputs.kwargs)


def _compared(ctx, sample: Sample, alone, batched, place: Place):
    """The leaves of the sample's answer in the batch that differ from its answer alone beyond noise,
    and how the structures differ."""
    mine, theirs = flatten(alone)[0], flatten(batched)[0]
    if [name for name, _ in mine] != [name for name, _ in theirs]:
        return [], "inside the batch forward returns other outputs"
    parts = {}
    for (name, a), (_, b) in zip(mine, theirs):
        both = isinstance(a, torch.Tensor) and isinstance(b, torch.Tensor)
        part = place.cut(a, b) if both else None
        parts[name] = b if part is None else part

    def fp64():
        truth = ctx.float64(sample.inputs)
        return truth if isinstance(truth, BaseException) else dict(flatten(truth)[0])

    leaves, structure = compare_outputs(dict(mine), parts, ctx.tolerances, fp64=fp64)
    return [leaf for leaf in leaves if not leaf.ok], structure if not leaves else None


def batch_dependence(ctx, stage: str) -> list[Finding]:
    """A batch-dependence finding for the first sample whose answer inside a batch of the user's samples
    differs from its answer alone, or that raises alone and not in the batch (or the other way round)."""
    if ctx.varies or ctx.noise is not None:
        return []  # outputs that vary between runs say nothing about the batch
    padding = ctx.spec.padding
    model = ctx.spec.pristine.copy() if ctx.spec.pristine else ctx.spec.model
    for group in _groups(samples(ctx.spec), padding):
        batch = batch_of(group, padding)
        padded = any(name in padding for name in batch.names or [])
        count = len(group)
        try:
            batched = _run(model, batch)
        except Exception as exc:
            return _declared(ctx.spec, _raised(ctx, stage, model, exc, f"a batch of {count} of your samples raises",
                                               "alone each runs"))
        for position, sample in enumerate(group):
            try:
                alone = _run(model, sample.inputs)
            except Exception as exc:
                return _declared(ctx.spec, _raised(ctx, stage, model, exc, f"{sample.describe()} alone (a batch of 1) "
                                                   "raises", f"inside a batch of {count} it runs; servers send "
                                                   "requests of one sample too"))
            place = Place.of(position, count, padded, sample.dims)
            bad, structure = _compared(ctx, sample, alone, batched, place)
            if bad or structure:
                differs = f"{bad[0].output}: {_how(bad[0])}" if bad else structure
                return _declared(ctx.spec, _first_divergent_op(ctx, stage, model, sample, batch, place, differs))
    return []


def _declared(spec, finding: Finding) -> list[Finding]:
    """The finding, saying which dim was taken for the batch and how to declare another, or none."""
    taken = sorted({dim for dim in _batch_dims(spec) if dim is not None})
    name, where = ("batch_dim", "check()'s batch_dim") if spec.is_object else ("BATCH_DIM", "BATCH_DIM in the model file")
    on = f"dim {taken[0]}" if len(taken) == 1 else f"the dims {name} names"
    finding.message += (f"; the samples were taken along {on} of the inputs: if that is no batch of independent "
                        f"samples, say so with {where} (None for no batch dim, another dim's index, or a dict "
                        "by input name)")
    return [finding]


def _how(leaf) -> str:
    """How a compared leaf differs, in a few words: its largest error where its values are off."""
    values_off = leaf.problem and "values off" in leaf.problem and leaf.max_abs_error is not None
    return f"max abs error {leaf.max_abs_error:.3g}" if values_off else leaf.problem


def _raised(ctx, stage: str, model, exc: Exception, what: str, but: str) -> Finding:
    """The finding for a model that raises at one batch size and not at another: at the user's line,
    with the norm's rewrite where a batch norm raised it (one sample has no batch statistics)."""
    text = str(exc).strip().splitlines()
    finding = finding_at(ctx.spec.user,
        stage, KIND, f"{what} {type(exc).__name__}{': ' + text[0] if text else ''}; {but}",
        location=ctx.spec.user.from_exception(exc))
    name, module = _raising_module(model, exc)
    if isinstance(module, torch.nn.modules.batchnorm._BatchNorm):
        finding.op = type(module).__name__
    if finding.op or "batch_norm" in (finding.code or ""):
        _norm_rewrite(ctx, stage, finding, name, module)
    return finding


def _raising_module(model, exc: BaseException) -> tuple[str | None, torch.nn.Module | None]:
    """The innermost module of `model` whose code the exception passed through, by name."""
    names = {id(module): name for name, module in model.named_modules()}
    found = (None, None)
    tb = exc.__traceback__
    while tb is not None:
        owner = tb.tb_frame.f_locals.get("self")
        if id(owner) in names:
            found = (names[id(owner)], owner)
        tb = tb.tb_next
    return found


class _Ops(TorchDispatchMode):
    """Every aten op's tensor outputs, with the user's line and the module it ran in; against a recorded
    run, the first op whose output differs from that run's, cut to the sample."""

    def __init__(self, user, modules: list, against: list | None = None, place: Place | None = None,
                 tolerances=None):
        super().__init__()
        self.user, self.modules, self.against = user, modules, against
        self.place, self.tolerances = place, tolerances
        self.ops: list[tuple] = []  # recorded: (op, its tensor outputs)
        self.seen = 0  # against a recorded run: the ops compared so far
        self.owned: dict[str, bool] = {}
        self.found: tuple | None = None  # (op, user frame, module, what differs)
        self.unaligned: tuple | None = None  # the same for the first op with no part that is the sample's

    def _frame(self):
        frame = sys._getframe(2)
        while frame is not None:
            name = frame.f_code.co_filename
            if name not in self.owned:
                self.owned[name] = self.user.owns(name)
            if self.owned[name]:
                return traceback.FrameSummary(name, frame.f_lineno, frame.f_code.co_name, lookup_line=False)
            frame = frame.f_back
        return None

    def __torch_dispatch__(self, func, types, args=(), kwargs=None):
        out = func(*args, **(kwargs or {}))
        if (self.found or func.overloadpacket.__name__ in _UNINITIALISED
                or torch.Tag.nondeterministic_seeded in getattr(func, "tags", ())):
            return out
        tensors = [leaf for leaf in pytree.tree_leaves(out) if isinstance(leaf, torch.Tensor)]
        if not tensors:
            return out
        if self.against is None:
            self.ops.append((func, [leaf.detach().clone() for leaf in tensors]))  # later ops may write in place
            return out
        differs, unaligned = self._differs(self.seen, func, tensors)
        self.seen += 1
        if differs:
            self.found = self._site(func, differs)
        elif unaligned and self.unaligned is None:
            self.unaligned = self._site(func, unaligned)
        return out

    def _site(self, func, what: str) -> tuple:
        return func, self._frame(), self.modules[-1] if self.modules else None, what

    def _differs(self, index: int, func, tensors: list[torch.Tensor]) -> tuple[str | None, str | None]:
        """How the op's output differs from the sample alone's; else, where no part of it is the
        sample's, its shapes."""
        if index >= len(self.against):
            return f"the batch runs {_name(func)} where the sample alone has finished", None
        theirs, alone = self.against[index]
        if theirs is not func:
            return f"the batch runs {_name(func)} where the sample alone runs {_name(theirs)}", None
        unaligned = None
        for a, b in zip(alone, tensors):
            part = self.place.cut(a, b.detach())
            shapes = f"shape {list(a.shape)} alone, {list(b.shape)} in the batch"
            if part is None and a.dim() != b.dim():
                return shapes, None
            if part is None:
                unaligned = unaligned or shapes  # the shapes do not say which part is the sample's
                continue
            atol, rtol = self.tolerances.resolve("", a.dtype)
            leaf = compare_leaf("", a, part, atol, rtol)
            if not leaf.ok:
                return _how(leaf), None
        return None, unaligned


def _name(func) -> str:
    return f"aten.{func.overloadpacket.__name__}"


def _tracking_modules(model, stack: list):
    """Global forward hooks keeping `stack` at the (name, module) of `model` running now, innermost last."""
    names = {id(module): name for name, module in model.named_modules()}

    def enter(module, _args):
        if id(module) in names:
            stack.append((names[id(module)], module))

    def leave(module, _args, _output):
        if stack and stack[-1][1] is module:
            stack.pop()

    hooks = torch.nn.modules.module
    return [hooks.register_module_forward_pre_hook(enter), hooks.register_module_forward_hook(leave, always_call=True)]


def _first_divergent_op(ctx, stage, model, sample: Sample, batch: InputSet, place: Place, differs: str) -> Finding:
    """The finding for `sample`: at the line of the first op whose output, cut to the sample, differs
    between the sample alone and the batch."""
    user, stack = ctx.spec.user, []
    handles = _tracking_modules(model, stack)
    try:
        with _Ops(user, stack) as recorded:
            _run(model, sample.inputs)
        stack.clear()
        with _Ops(user, stack, recorded.ops, place, ctx.tolerances) as batched:
            _run(model, batch)
    except Exception:
        batched = None  # an op the recording cannot pass through: the outputs still say it
    finally:
        for handle in handles:
            handle.remove()
    message = (f"answers depend on the batch: {sample.describe()} inside a batch of {place.count} of your samples "
               f"differs from its answer alone beyond fp64-adjudicated noise ({differs})")
    site = batched and (batched.found or batched.unaligned)
    if not site:
        return finding_at(user, stage, KIND, f"{message}; {_CONSEQUENCE}")
    func, frame, running, what = site
    name, module = running or (None, None)
    finding = finding_at(user, stage, KIND, f"{message}; the first op whose output differs is {_name(func)} "
                                        f"({what}); {_CONSEQUENCE}", location=frame or ctx.spec.build_sites.get(name),
                           op=_name(func))
    if "batch_norm" in func.overloadpacket.__name__:
        _norm_rewrite(ctx, stage, finding, name, module)
    return finding


def _norm_rewrite(ctx, stage: str, finding: Finding, name: str | None, module) -> None:
    """A batch norm that normalises with the batch's statistics: the rewrite that makes it use running ones."""
    bn = torch.nn.modules.batchnorm._BatchNorm
    if finding.code and _TRAINING_TRUE.search(finding.code):
        finding.rewrite = _TRAINING_TRUE.sub("training=self.training", finding.code)
        finding.message += "; training=True normalises with the batch's statistics in eval mode too"
    elif isinstance(module, bn) and module.training:
        finding.rewrite = "model.eval()"
        finding.message += (f"; {type(module).__name__} ran in training mode, normalising with the batch's "
                            "statistics: serve the model in eval mode, and leave it there in forward")
    elif isinstance(module, bn) and not module.track_running_stats:
        built = ctx.spec.build_sites.get(name)
        if built is not None:
            moved = finding_at(ctx.spec.user, stage, KIND, finding.message, location=built, op=finding.op)
            finding.file, finding.line, finding.code = moved.file, moved.line, moved.code
        finding.message += (f"; {type(module).__name__} built with track_running_stats=False uses the batch's "
                            "statistics in eval mode too: keep running statistics (the default) and train them")
        if finding.code and _NO_RUNNING_STATS.search(finding.code):
            finding.rewrite = _NO_RUNNING_STATS.sub("", finding.code)
