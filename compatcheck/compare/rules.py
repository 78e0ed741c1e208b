"""What `pass` means for one output leaf: one ordered table of rules. The first row that applies decides,
and the leaf's comparison names it (`LeafComparison.rule`); the docs' comparison page is generated from
the table. A row reads the leaf (`Leaf`: eager's value, the artifact's, the tolerance, the float64 run)
and nothing any other row keeps."""

from __future__ import annotations

from dataclasses import dataclass, field
from functools import cached_property
from typing import Callable

import numpy as np
import torch

from compatcheck.compare.elements import EAGER_FAR, FP64_MULTIPLIER, Adjudication, numpy64, rmse, rounding
from compatcheck.compare.structure import to_tensor
from compatcheck.report.model import LeafComparison


@dataclass
class Leaf:
    """One output leaf of eager and of the artifact, as the rules read it. `fp64`/`float32`: callables
    giving the float64 run's (or the float32 model's, with --dtype) value of this leaf, or the exception
    that kept it from running; `partner`: (eager's, the artifact's) values leaf beside an integer leaf of
    the same shape (topk's values beside its indices)."""

    name: str
    expected: torch.Tensor
    actual: object
    atol: float
    rtol: float
    binding: bool = False
    noise: torch.Tensor | None = None
    fp64: Callable | None = None
    float32: Callable | None = None
    values: bool = True
    partner: tuple | None = None
    result: LeafComparison = field(init=False)

    def __post_init__(self):
        self.result = LeafComparison(output=self.name, shape=list(self.expected.shape),
                                     dtype=str(self.expected.dtype).replace("torch.", ""), ok=False,
                                     atol=self.atol, rtol=self.rtol)

    @cached_property
    def got(self) -> torch.Tensor | None:
        return to_tensor(self.actual)

    @property
    def floating(self) -> bool:
        return self.expected.is_floating_point() or self.expected.is_complex()

    @cached_property
    def truth(self):
        """The float64 run's value of this leaf (an array of eager's shape), or why there is none, in words
        ("" where none was given)."""
        if self.fp64 is None:
            return ""
        found = self.fp64()
        if isinstance(found, BaseException):
            return _why(found)
        found = to_tensor(found)
        if found is None or tuple(found.shape) != tuple(self.expected.shape):
            return "it has no such output"
        return numpy64(found) if self.floating else found

    @cached_property
    def e(self) -> np.ndarray:
        return numpy64(self.expected)

    @cached_property
    def a(self) -> np.ndarray:
        return numpy64(self.got)

    @cached_property
    def diff(self) -> np.ndarray:
        with np.errstate(invalid="ignore", over="ignore"):
            return np.where(np.isfinite(self.e) & np.isfinite(self.a), np.abs(self.a - self.e), 0.0)

    @cached_property
    def spread(self) -> np.ndarray | float:
        """Eager's distance from itself between two identical calls, where it has one."""
        return np.abs(numpy64(to_tensor(self.noise)) - self.e) if self.noise is not None else 0.0

    @cached_property
    def close(self) -> np.ndarray:
        """Within the tolerance, or twice eager's own spread, of eager: |a - e| <= atol + rtol * |e|."""
        allowed = np.maximum(self.atol + self.rtol * np.abs(self.e), 2 * self.spread)
        both = np.isfinite(self.e) & np.isfinite(self.a)
        return ~both | (self.diff <= allowed)

    @cached_property
    def special(self) -> np.ndarray:
        return unmatched_special(self.e, self.a)


def unmatched_special(want: np.ndarray, got: np.ndarray) -> np.ndarray:
    """Where NaN or infinity on one side is not matched exactly by the other."""
    return (np.isnan(want) != np.isnan(got)) | (~(np.isfinite(want) & np.isfinite(got))
                                                & ~(np.isnan(want) & np.isnan(got)) & (want != got))


def _why(exc: BaseException) -> str:
    return str(exc).strip().splitlines()[0][:160] if str(exc).strip() else type(exc).__name__


def tolerance_words(leaf: Leaf) -> str:
    return (f"(atol {leaf.atol:g}, rtol {leaf.rtol:g}"
            f"{', your tolerance: a bound no float64 run widens' if leaf.binding else ''})")


def passed(leaf: Leaf) -> LeafComparison:
    leaf.result.ok, leaf.result.mismatched_fraction = True, 0.0
    return leaf.result


def failed(leaf: Leaf, off: np.ndarray, rank: np.ndarray, why: str) -> LeafComparison:
    """The leaf fails at the elements `off`; `rank` picks the one to name, `why` says by which rule."""
    result = leaf.result
    result.ok, result.mismatched_fraction = False, float(off.mean())
    at = np.unravel_index(int(np.argmax(np.where(off, rank, -np.inf))), off.shape)
    result.worst_index = [int(i) for i in at]
    result.problem = (f"{result.mismatched_fraction:.1%} of values off; max abs error {result.max_abs_error:.3g} "
                      f"at {tuple(result.worst_index)} {why}")
    return result


def measure(leaf: Leaf) -> None:
    """A float leaf's distance from eager into its comparison: the largest, and the atol and rtol that would
    have covered it."""
    result, magnitude, diff = leaf.result, np.abs(leaf.e), leaf.diff
    result.max_abs_error = float(diff.max())
    with np.errstate(divide="ignore", invalid="ignore"):
        result.max_rel_error = float(np.where(magnitude > 0, diff / magnitude, 0.0).max())
        need = np.where(magnitude > 0, (diff - leaf.atol) / magnitude, np.where(diff > leaf.atol, np.inf, 0.0))
    if not leaf.special.any():
        result.required_atol = float(np.max(np.maximum(diff - leaf.rtol * magnitude, 0.0)))
        result.required_rtol = float(max(np.max(need), 0.0))


def _kind(leaf: Leaf) -> str | None:
    """What keeps the artifact's leaf from being compared value by value: its type, shape or dtype."""
    got = leaf.got
    if got is None:
        return f"got {type(leaf.actual).__name__}, expected a tensor"
    if tuple(got.shape) != tuple(leaf.expected.shape):
        return f"shape {list(got.shape)}, expected {list(leaf.expected.shape)}"
    if got.dtype != leaf.expected.dtype:
        return f"dtype {str(got.dtype).replace('torch.', '')}, expected {leaf.result.dtype}"
    return None


def _wrong_kind(leaf: Leaf) -> LeafComparison:
    leaf.result.problem = _kind(leaf)
    return leaf.result


def _differs(leaf: Leaf) -> np.ndarray:
    return ~(leaf.got == leaf.expected).numpy()


def _tied(leaf: Leaf, off: np.ndarray) -> np.ndarray:
    """The differing indices at which the values beside them tie: the artifact's value there is eager's
    exactly, and where the artifact's index is among eager's in the same row (the last dimension), eager's
    value at that slot is the same value."""
    if leaf.partner is None or leaf.expected.dim() == 0:
        return np.zeros_like(off)
    values, got_values = (numpy64(to_tensor(v)) for v in leaf.partner)
    mine, theirs = leaf.expected.numpy(), leaf.got.numpy()
    tied = np.zeros_like(off)
    for at in zip(*np.nonzero(off & (values == got_values))):  # only there can the values tie
        slots = np.nonzero(mine[at[:-1]] == theirs[at])[0]
        tied[at] = not slots.size or values[at[:-1]][slots[0]] == values[at]
    return tied


def _edges(leaf: Leaf, off: np.ndarray) -> np.ndarray:
    """The differing elements where the float64 run gives the artifact's integer: a rounding edge."""
    truth = leaf.truth
    if isinstance(truth, str):
        return np.zeros_like(off)
    return off & (truth.numpy() == leaf.got.numpy())


def _integers(leaf: Leaf) -> LeafComparison:
    """An integer or boolean leaf: every value eager's, except where the contract's oracle accepts it."""
    off = _differs(leaf)
    result = leaf.result
    result.max_abs_error = (float((leaf.got.double() - leaf.expected.double()).abs().max())
                            if leaf.expected.dtype != torch.bool else float(off.any()))
    if not off.any():
        return passed(leaf)
    tied, edges = _tied(leaf, off), _edges(leaf, off)
    accepted = tied | edges
    if accepted[off].all():
        said = [f"{int(tied.sum())} at ties of the values beside them" if tied.any() else "",
                f"{int((edges & ~tied).sum())} at rounding edges (the float64 run gives the artifact's)"
                if (edges & ~tied).any() else ""]
        result.accepted = f"{int(off.sum())} of {off.size} values differ, accepted: " + ", ".join(filter(None, said))
        return passed(leaf)
    bad = off & ~accepted
    result.mismatched_fraction, result.ok = float(bad.mean()), False
    result.worst_index = [int(i) for i in np.unravel_index(int(np.argmax(bad)), bad.shape)]
    result.problem = (f"{int(bad.sum())} of {off.size} values differ, first at {tuple(result.worst_index)} "
                      "(exact match required: no tie of the values beside them, no rounding edge)")
    return result


def _special_values(leaf: Leaf) -> LeafComparison:
    measure(leaf)
    e, a, off = leaf.e, leaf.a, leaf.special
    artifact = int((off & ~np.isfinite(a) & np.isfinite(e)).sum())
    eager = int((off & ~np.isfinite(e) & np.isfinite(a)).sum())
    said = [f"{count} {where}" for count, where in (
        (artifact, "NaN/Inf values in the artifact where eager's are finite"),
        (eager, "NaN/Inf values in eager where the artifact's are finite"),
        (int(off.sum()) - artifact - eager, "NaN/Inf values that differ between the two")) if count]
    result = failed(leaf, off, off.astype(float), "")
    result.problem, result.required_atol, result.required_rtol = "; ".join(said), None, None
    return result


def _within_tolerance(leaf: Leaf, why: str = "") -> LeafComparison:
    """The tolerance decides: every element close to eager."""
    measure(leaf)
    if leaf.close.all():
        return passed(leaf)
    leaf.result.fp64_verdict = why or None
    allowed = leaf.atol + leaf.rtol * np.abs(leaf.e)
    return failed(leaf, ~leaf.close, leaf.diff - allowed,
                  f"{tolerance_words(leaf)}{f': no float64 run to judge it by: {why}' if why else ''}")


def _agrees(leaf: Leaf) -> bool:
    """Eager and the artifact agree to rtol and one rounding step everywhere: no float64 run can say more
    (the float64 rule allows rtol, eager's own distance and that step)."""
    eps, tiny = rounding(leaf.expected.dtype)
    magnitude = np.abs(leaf.e)
    return bool((leaf.close & (leaf.diff <= (leaf.rtol + eps) * magnitude + tiny)).all())


def _agreed(leaf: Leaf) -> LeafComparison:
    measure(leaf)
    return passed(leaf)


def _float64(leaf: Leaf) -> LeafComparison:
    """Element by element against the float64 run (elements.Adjudication)."""
    measure(leaf)
    eps, tiny = rounding(leaf.expected.dtype)
    judged = Adjudication(leaf.e, leaf.a, leaf.truth, leaf.atol, leaf.rtol, eps, tiny, spread=leaf.spread)
    ok = judged.ok(leaf.close)
    if ok.all():
        leaf.result.fp64_verdict = "within-noise" if (~leaf.close).any() else None
        return passed(leaf)
    bad, close = ~ok, leaf.close
    diverged, lost, far = bad & judged.eager_near & ~close, bad & close, bad & ~judged.eager_near
    rank, verdict, why = _why_off(judged, diverged, lost, far, leaf.truth)
    leaf.result.fp64_verdict = verdict
    return failed(leaf, bad, rank, f"{tolerance_words(leaf)}: {why}")


def _why_off(judged: Adjudication, diverged, lost, far, truth):
    """(the ranking that picks the element to name, the leaf's fp64_verdict, why it fails in words), most
    telling first: off the tolerance and farther from float64 than eager allows; within it but without the
    digits eager keeps; off it where eager itself is far from float64."""
    stage, eager, excess = judged.stage_error, judged.eager_error, judged.excess
    if diverged.any():
        at = np.unravel_index(int(np.argmax(np.where(diverged, excess, -np.inf))), excess.shape)
        said = (f"{float(stage[at]):.3g} from float64 at {tuple(int(i) for i in at)}, where eager is "
                f"{float(eager[at]):.3g}")
        return np.where(diverged, excess, -np.inf), said, said
    if lost.any():
        at = np.unravel_index(int(np.argmax(np.where(lost, stage, -np.inf))), stage.shape)
        return (np.where(lost, stage, -np.inf),
                f"{int(lost.sum())} values within the tolerance but {float(stage[at]):.3g} from float64 where "
                f"eager is {float(eager[at]):.3g}",
                f"within it, but {float(stage[at]):.3g} from float64 where eager is {float(eager[at]):.3g} (value "
                f"{float(truth[at]):.3g}): the artifact loses digits eager keeps")
    at = np.unravel_index(int(np.argmax(np.where(far, eager, -np.inf))), eager.shape)
    said = (f"eager itself is {float(eager[at]):.3g} from float64 at {tuple(int(i) for i in at)}: numerically "
            "unstable there, or float64 takes another path")
    return np.where(far, eager, -np.inf), said, f"{said}, so float64 cannot call it noise"


def _reduced(leaf: Leaf) -> LeafComparison:
    """--dtype float16/bfloat16: element by element against the float64 run of the model as cast, within
    twice what eager in the same dtype shows at the element's magnitude, plus atol/10; where the model
    refuses float64, its float32 answers stand in."""
    result = leaf.result
    measure(leaf)
    f = to_tensor(leaf.float32())
    f = numpy64(f) if f is not None and tuple(f.shape) == tuple(leaf.expected.shape) else None
    finite = np.isfinite(f) & np.isfinite(leaf.a) if f is not None else None
    if finite is not None and finite.any():
        result.float32_error = float(np.max(np.abs(leaf.a[finite] - f[finite])))
    truth, instead = leaf.truth, "the float64 run"
    if isinstance(truth, str):
        truth, instead = f, f"the float32 answers (no float64 run: {truth})"
    if truth is None:
        result.problem = "no float64 or float32 run of the model to judge its reduced precision by"
        return result
    a = leaf.a
    special = unmatched_special(truth, a)
    result.fp64_error, result.eager_fp64_error = rmse(truth, a), rmse(truth, leaf.e)
    if special.any():
        failed(leaf, special, special.astype(float), "")
        result.problem = (f"{int(special.sum())} of {special.size} values NaN/Inf where {instead} has finite ones "
                          f"(first at {tuple(result.worst_index)}): the model leaves {result.dtype}'s range")
        return result
    eps, tiny = rounding(leaf.expected.dtype)
    judged = Adjudication(leaf.e, a, truth, leaf.atol, leaf.rtol, eps, tiny, gated=False)
    bound = judged.allowance + leaf.atol / 10
    ok = ~judged.finite | (judged.stage_error <= bound)
    rule = f"{FP64_MULTIPLIER:g} × eager {result.dtype}'s distance to {instead} at the element's magnitude + atol/10"
    if ok.all():
        result.fp64_verdict = f"{result.dtype} rule: every element within {rule}"
        return passed(leaf)
    result.fp64_verdict = f"{result.dtype} rule: {int((~ok).sum())} elements beyond {rule}"
    return failed(leaf, ~ok, judged.stage_error - bound, f"from {instead}, beyond {rule}")


@dataclass(frozen=True)
class Rule:
    name: str
    when: str  # when it applies, in words (the docs page)
    decides: str
    sound: str  # why deciding so is right
    applies: Callable[[Leaf], bool]
    judge: Callable[[Leaf], LeafComparison]


RULES: tuple[Rule, ...] = (
    Rule("kind", "the artifact's leaf is not a tensor or number, or its shape or dtype is not eager's",
         "mismatch", "no value comparison means anything across shapes or dtypes; a Python number counts as a "
         "0-d tensor of the dtype it came from", lambda leaf: _kind(leaf) is not None, _wrong_kind),
    Rule("structure only", "the leaf is empty, or its values vary by design (random, the clock)", "pass",
         "the shape and dtype were compared; values that change between identical calls of eager say nothing",
         lambda leaf: not leaf.values or leaf.expected.numel() == 0, passed),
    Rule("integers", "an integer or boolean leaf", "pass where every value is eager's, or differs only where "
         "the oracle accepts it: a tie (the values beside it equal at both indices: topk, sort, max(dim)) or a "
         "rounding edge (the float64 run gives the artifact's integer); mismatch otherwise",
         "an index or a count has no tolerance; a tie or a float that lands on .5 has two right answers, and "
         "only those are accepted, each counted in the leaf", lambda leaf: not leaf.floating, _integers),
    Rule("special values", "NaN or infinity on one side is not matched exactly on the other", "mismatch",
         "torch.testing's rule (equal_nan): a NaN or an infinity is never noise",
         lambda leaf: leaf.float32 is None and bool(leaf.special.any()), _special_values),
    Rule("reduced precision", "with --dtype float16 or bfloat16, a floating leaf", "pass where every element is "
         f"within {FP64_MULTIPLIER:g} × eager's distance to the float64 run at its magnitude + atol/10",
         "eager in the same dtype shows what that dtype costs at each magnitude; an RMS would average a wrong "
         "column away (it stays in the report as a measure)", lambda leaf: leaf.float32 is not None, _reduced),
    Rule("your tolerance", "you set the tolerance (--atol/--rtol or TOLERANCE)", "pass where every element is "
         "within atol + rtol × |eager| (or twice eager's spread between identical calls)",
         "your tolerance is a bound: no float64 run widens or narrows it",
         lambda leaf: leaf.binding, _within_tolerance),
    Rule("agree", "every element is within rtol and one rounding step of eager", "pass",
         "the float64 rule allows at least rtol, eager's own distance and a rounding step: it could not fail it",
         _agrees, _agreed),
    Rule("no float64 run", "the model does not run in float64, or its numbers are drawn at random",
         "the tolerance decides (atol + rtol × |eager|, or twice eager's spread)",
         "without float64 nothing tells eager's rounding from the artifact's; the tolerance is the only judge",
         lambda leaf: isinstance(leaf.truth, str), lambda leaf: _within_tolerance(leaf, leaf.truth)),
    Rule("float64", "otherwise", "element by element against the float64 run: off the tolerance, pass only "
         f"within rtol + {FP64_MULTIPLIER:g} × eager's distance to float64 (at the element, or its typical distance "
         f"at that magnitude or anywhere in the output, up to {EAGER_FAR:g} × the tolerance) where eager is within {EAGER_FAR:g} × the tolerance of float64; within the "
         "tolerance, fail where the artifact loses digits eager keeps",
         "as PyTorch's same() with fp64_ref, per element: the artifact is as right as eager; a typical distance "
         "covers kernels that round at other elements, never an outlier nor noise beyond the element's own scale",
         lambda leaf: True, _float64),
)


def judge(leaf: Leaf) -> LeafComparison:
    """The leaf's comparison: the first rule that applies decides, and is named."""
    rule = next(rule for rule in RULES if rule.applies(leaf))
    result = rule.judge(leaf)
    result.rule = rule.name
    return result
