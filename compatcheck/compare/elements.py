"""The arithmetic of the float64 adjudication, element by element.

An artifact is as right as eager at an element when its distance to the float64 run is within what eager
itself shows there: twice eager's own distance at that element (PyTorch's `same()` allows its backend
twice eager's distance to float64, as one RMS; here per element), or twice eager's typical distance at
elements of the same magnitude or anywhere in the output (a high quantile, never the maximum), lent only
where it is within ten times the element's tolerance. So two correct kernels that round at different
elements both pass, while one element's cancellation error, or a large value's noise, never covers its
neighbours. Within the tolerance, what eager keeps is judged in the element's magnitude band alone."""

from __future__ import annotations

import numpy as np
import torch

FP64_MULTIPLIER = 2.0  # as PyTorch's same(): the artifact may be twice as far from float64 as eager
# Eager farther from float64 than this many times the tolerance has lost the digits the tolerance asks for
# there (the model is numerically unstable, or the float64 run took another path): it lends no pass.
EAGER_FAR = 10.0
BAND_QUANTILE = 0.99  # eager's typical distance in a band: one outlier (a cancellation) is never it
BAND_HALF_OCTAVES = 2  # the band: the element's half-octave of magnitude and two on each side
MIN_BAND = 8  # elements of one magnitude it takes to show the artifact loses that magnitude's digits
ROUNDING_STEPS = 4  # rounding steps at the output's own scale that a dtype cannot resolve below
_ZERO_BAND = np.iinfo(np.int64).min // 2  # exact zeros are a band of their own


def numpy64(t: torch.Tensor) -> np.ndarray:
    return (t.to(torch.complex128) if t.is_complex() else t.to(torch.float64)).numpy()


def rounding(dtype: torch.dtype) -> tuple[float, float]:
    """The rounding step at 1 and the smallest normal number of a float or complex dtype: below the latter
    a backend may flush to zero."""
    info = torch.finfo(dtype.to_real() if dtype.is_complex else dtype)
    return info.eps, info.tiny


def _lower_quantile(values: np.ndarray) -> float:
    """np.quantile(values, BAND_QUANTILE, method="lower"), without its per-call overhead (one call per band)."""
    k = int(BAND_QUANTILE * (len(values) - 1))
    return float(np.partition(values, k)[k])


class Bands:
    """The elements of an output by magnitude: an element's band is its half-octave of `size` and
    BAND_HALF_OCTAVES on each side (between about 0.35 and 2.8 times it); exact zeros are a band of their own."""

    def __init__(self, size: np.ndarray):
        flat = size.ravel()
        with np.errstate(divide="ignore"):
            bins = np.where(flat > 0, np.floor(2 * np.log2(np.where(flat > 0, flat, 1.0))), _ZERO_BAND).astype(np.int64)
        keys, inverse = np.unique(bins, return_inverse=True)
        self.shape, self.inverse = size.shape, inverse.ravel()
        self.order = np.argsort(self.inverse, kind="stable")
        self.starts = np.concatenate([[0], np.cumsum(np.bincount(self.inverse, minlength=len(keys)))])
        self.lows = np.searchsorted(keys, keys - BAND_HALF_OCTAVES)
        self.highs = np.searchsorted(keys, keys + BAND_HALF_OCTAVES, side="right")

    def _per_element(self, per_band: np.ndarray) -> np.ndarray:
        return per_band[self.inverse].reshape(self.shape)

    def typical(self, error: np.ndarray) -> np.ndarray:
        """Per element, the BAND_QUANTILE (lower) of `error` over the elements of its band."""
        errors = error.ravel()[self.order]
        return self._per_element(np.array([_lower_quantile(errors[self.starts[lo]:self.starts[hi]])
                                           for lo, hi in zip(self.lows, self.highs)]))

    def count(self) -> np.ndarray:
        """Per element, how many elements its band holds."""
        return self._per_element(self.starts[self.highs] - self.starts[self.lows])


def rmse(a: np.ndarray, b: np.ndarray) -> float:
    finite = np.isfinite(a) & np.isfinite(b)
    if not finite.any():
        return 0.0
    return float(np.sqrt(np.mean(np.abs(a[finite] - b[finite]) ** 2)))


class Adjudication:
    """Eager (`e`) and the artifact (`a`) against the float64 run (`truth`), element by element, at the
    tolerance (atol, rtol) of a dtype whose rounding step at 1 is `eps`. `spread`: eager's distance from
    itself between identical calls, or 0. `gated`: a band lends only where eager is near float64 there."""

    def __init__(self, e, a, truth, atol, rtol, eps, tiny, spread=0.0, gated=True):
        self.finite, self.rtol = np.isfinite(truth), rtol
        t = np.where(self.finite, truth, 0.0)
        self.size = np.abs(t)
        self.bands = Bands(self.size)
        with np.errstate(invalid="ignore"):
            self.eager_error = np.nan_to_num(np.abs(e - t), nan=np.inf)
            self.stage_error = np.nan_to_num(np.abs(a - t), nan=np.inf)
        self.tolerance = atol + rtol * self.size
        known = np.where(self.finite, self.eager_error, 0.0)
        self.band = self.bands.typical(known)
        # What eager typically strays anywhere in the output lends too: where the error comes from an argument's
        # size rather than the output's (sin of timesteps near 1000 is as far off at a zero crossing as at a
        # peak), the band alone is too narrow a view. The gate keeps any magnitude's noise from covering a
        # real error: nothing beyond ten times the element's own tolerance is lent.
        anywhere = _lower_quantile(known.ravel()) if known.size else 0.0
        gate = EAGER_FAR * self.tolerance
        self.lent = (np.maximum(np.where(self.band <= gate, self.band, 0.0), np.where(anywhere <= gate, anywhere, 0.0))
                     if gated else self.band)
        # Eager near float64 at the element and at its magnitude: a band where eager is typically far (values
        # on a quantization grid's rounding edges, a sum that cancels) is one float64 cannot judge.
        self.eager_near = (self.eager_error <= EAGER_FAR * self.tolerance) & (self.band <= EAGER_FAR * self.tolerance)
        own = np.maximum(np.where(np.isfinite(self.eager_error), self.eager_error, 0.0), spread)
        self.floor = eps * self.size + tiny  # a rounding step of the dtype at the element's size
        self.allowance = FP64_MULTIPLIER * np.maximum(own, self.lent) + self.floor
        scale = float(np.sqrt(np.mean(self.size[self.finite] ** 2))) if self.finite.any() else 0.0
        self.output_step = ROUNDING_STEPS * eps * scale
        self.excess = self.stage_error - (rtol * self.size + self.allowance)  # > 0: farther than eager allows

    def ok(self, close: np.ndarray) -> np.ndarray:
        """Off the tolerance, an element passes only when as near float64 as eager allows, and eager is near
        it there. Within it, an element fails only where the artifact loses digits eager keeps, at that element
        and across its magnitude band (its typical distance beyond twice eager's typical one, beyond a rounding
        step at the output's own scale): one element a kernel rounds otherwise is the tolerance's to allow,
        a magnitude whose digits are all lost (Exp(x) - 1 for expm1 near 1e-8) is not."""
        faithful = self.finite & (self.excess <= 0)
        kept = self.excess <= self.output_step
        typical = self.bands.typical(np.where(self.finite, self.stage_error, 0.0))
        systematic = ((typical > self.rtol * self.size + self.output_step + FP64_MULTIPLIER * self.band + self.floor)
                      & (self.bands.count() >= MIN_BAND))
        return np.where(close, kept | ~systematic | ~self.eager_near, faithful & self.eager_near)
