"""Where eager itself is far from its float64 run: the model is numerically unstable there (float32 cancels
the digits away), or float64 takes another path. Every backend then answers differently, and no float64
run can tell their noise from an error, so the user is told where it starts: the first op whose float32
output leaves float64's, found by running both op by op."""

from __future__ import annotations

import traceback

import torch
from torch.utils._python_dispatch import TorchDispatchMode

from compatcheck.compare import EAGER_FAR, flatten, to_tensor
from compatcheck.report.model import Finding
from compatcheck.diagnose.found import finding_at

MAX_OPS = 20_000  # ops recorded per run; a forward longer than that is located within its first ones


def instability(ctx, stage: str) -> list[Finding]:
    """A `numerically-unstable` finding for the first input set where eager's output is farther from float64
    than EAGER_FAR times the tolerance; none for a model that varies by design or refuses float64."""
    if ctx.varies or ctx.noise is not None or ctx.reduced:
        return []
    for index, reference in enumerate(ctx.reference):
        truth = ctx.fp64(index)
        if isinstance(truth, BaseException):
            return []
        far = _farthest(ctx, reference, truth)
        if far is not None:
            return [_finding(ctx, stage, index, *far)]
    return []


def _farthest(ctx, reference, truth):
    """(output name, index, eager's value, float64's) where eager is farthest beyond the bound, or None."""
    worst = None
    pairs, truths = flatten(reference)[0], [leaf for _, leaf in flatten(truth)[0]]
    for (name, leaf), other in zip(pairs, truths):
        e, t = to_tensor(leaf), to_tensor(other)
        if e is None or t is None or not e.is_floating_point() or e.shape != t.shape or not e.numel():
            continue
        atol, rtol = ctx.tolerances.resolve(name, e.dtype)
        e64, t64 = e.double(), t.double()
        finite = torch.isfinite(e64) & torch.isfinite(t64)
        excess = torch.where(finite, (e64 - t64).abs() / (EAGER_FAR * (atol + rtol * t64.abs())), 0.0)
        at = int(excess.argmax())
        if float(excess.flatten()[at]) > 1 and (worst is None or float(excess.flatten()[at]) > worst[0]):
            where = tuple(int(i) for i in torch.unravel_index(torch.tensor(at), e.shape))
            worst = (float(excess.flatten()[at]), name, where, float(e64.flatten()[at]), float(t64.flatten()[at]))
    return worst[1:] if worst else None


def _finding(ctx, stage: str, index: int, name: str, where: tuple, value: float, truth: float) -> Finding:
    message = (f"eager is {abs(value - truth):.3g} from its float64 run on input set {index + 1}, output {name} at "
               f"{where} ({value:.6g} where float64 gives {truth:.6g}): every backend will answer differently, "
               "and none can be judged against float64 there")
    try:
        op, frame, how = _first_divergence(ctx, ctx.spec.input_sets[index])
    except Exception:  # the op-by-op run is a diagnosis: it may fail where the model's own runs did not
        op, frame, how = None, None, None
    if how == "path":
        message += f"; the float64 run takes another path at {op}, so float64 is no reference for this model"
    elif op is not None:
        message += f"; it starts at {op}, whose float32 output is already that far from float64's: numerically " \
                   "unstable (a difference of nearly equal values, or a sum that cancels); compute it in a form " \
                   "that does not cancel, or in float64"
    return finding_at(ctx.spec.user, stage, "numerically-unstable", message, location=frame, op=op)


class _Outputs(TorchDispatchMode):
    """Records each op's name, first floating output and the Python stack that called it."""

    def __init__(self, user):
        super().__init__()
        self.user, self.ops = user, []

    def __torch_dispatch__(self, func, types, args=(), kwargs=None):
        out = func(*args, **(kwargs or {}))
        if len(self.ops) < MAX_OPS:
            first = next((t for t in torch.utils._pytree.tree_leaves(out)
                          if isinstance(t, torch.Tensor) and t.is_floating_point()), None)
            frame = self.user.innermost(traceback.extract_stack()[:-1])
            self.ops.append((func.overloadpacket.__name__, None if first is None else first.detach().double().clone(),
                             frame))
        return out


def _first_divergence(ctx, input_set):
    """(op, its user frame, 'path' or 'value'): the first op where the float64 run calls another op, or whose
    float32 output is farther from float64's than EAGER_FAR times the default tolerance."""
    runs = []
    for cast in (False, True):
        model = ctx.spec.pristine.copy() if ctx.spec.pristine else ctx.spec.model
        one = input_set.copy()
        if cast:
            model, one = model.double(), one.in_float64()
        with torch.no_grad(), _Outputs(ctx.spec.user) as recording:
            model(*one.args, **one.kwargs)
        runs.append(recording.ops)
    atol, rtol = ctx.tolerances.resolve("", torch.float32)
    for (name, low, frame), (other, high, _) in zip(*runs):
        if name != other:
            return f"aten.{name}", frame, "path"
        if low is not None and high is not None and low.shape == high.shape and low.numel():
            finite = torch.isfinite(low) & torch.isfinite(high)
            if bool((finite & ((low - high).abs() > EAGER_FAR * (atol + rtol * high.abs()))).any()):
                return f"aten.{name}", frame, "value"
    return None, None, None
