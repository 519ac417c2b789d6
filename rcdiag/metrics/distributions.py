"""Student's t tail probability without scipy, which the growth test (:mod:`rcdiag.metrics.growth`)
reads its p-values from, and the median and quantiles read over steps and bootstrap replicates
(numpy's own import its masked arrays)."""

from __future__ import annotations

import math
from collections.abc import Sequence

import numpy as np


def median(values: Sequence[float] | np.ndarray) -> float:
    """The median: the middle value, or the mean of the two middle values, of the sorted values;
    NaN when one is NaN or there is none. The same as ``np.median``, which imports numpy's
    masked arrays (~12 ms of every start-up that reaches it).

    Example:
        >>> median([3.0, 1.0, 2.0]), median([4.0, 1.0, 2.0, 3.0]), median([1.0, float("nan")])
        (2.0, 2.5, nan)
    """
    ordered = np.sort(np.asarray(values, dtype=np.float64).reshape(-1))  # NaN sorts last
    if ordered.size == 0 or np.isnan(ordered[-1]):
        return math.nan
    middle = ordered.size // 2
    if ordered.size % 2:
        return float(ordered[middle])
    return float((ordered[middle - 1] + ordered[middle]) / 2.0)


def quantiles(values: Sequence[float] | np.ndarray, qs: Sequence[float]) -> list[float]:
    """numpy's default (``linear``) quantiles: for each q in [0, 1], the sorted values x₍₀₎ … x₍ₙ₋₁₎
    interpolated at h = (n − 1)·q, x₍⌊h⌋₎ + (h − ⌊h⌋)·(x₍⌊h⌋₊₁₎ − x₍⌊h⌋₎) (from the upper value when
    h − ⌊h⌋ ≥ ½, as numpy does); NaN when a value is NaN. ``np.quantile`` imports numpy's masked
    arrays (~12 ms of a start-up).

    Example:
        >>> quantiles([4.0, 1.0, 3.0, 2.0], [0.0, 0.5, 0.75, 1.0])
        [1.0, 2.5, 3.25, 4.0]
    """
    ordered = np.sort(np.asarray(values, dtype=np.float64).reshape(-1))  # NaN sorts last
    if ordered.size == 0:
        raise ValueError("quantiles of no values")
    if np.isnan(ordered[-1]):
        return [math.nan] * len(qs)
    out = []
    for q in qs:
        if not 0.0 <= q <= 1.0:
            raise ValueError(f"quantile {q} outside [0, 1]")
        h = (ordered.size - 1) * q
        low = math.floor(h)
        fraction = h - low
        a, b = float(ordered[low]), float(ordered[min(low + 1, ordered.size - 1)])
        out.append(a + (b - a) * fraction if fraction < 0.5 else b - (b - a) * (1.0 - fraction))
    return out


def student_t_sf(t: float, dof: int) -> float:
    """P(T > t) for Student's t with ``dof`` degrees of freedom (the normal law for dof ≥ 200).

    .. math::
        P(T > t) = \\tfrac12 I_{\\nu / (\\nu + t^2)}(\\nu/2, 1/2) \\quad (t \\ge 0)

    Example:
        >>> round(student_t_sf(2.0, 4), 6), round(student_t_sf(0.0, 3), 6)
        (0.058058, 0.5)
    """
    if dof <= 0:
        return 0.5
    if dof >= 200:
        return 0.5 * math.erfc(t / math.sqrt(2.0))
    tail = 0.5 * _incomplete_beta(dof / 2.0, 0.5, dof / (dof + t * t))
    return tail if t >= 0 else 1.0 - tail


def _incomplete_beta(a: float, b: float, x: float) -> float:
    """The regularised incomplete beta function I_x(a, b) (Lentz's continued fraction)."""
    if x <= 0.0:
        return 0.0
    if x >= 1.0:
        return 1.0
    log_front = (
        math.lgamma(a + b) - math.lgamma(a) - math.lgamma(b) + a * math.log(x) + b * math.log1p(-x)
    )
    if x > (a + 1.0) / (a + b + 2.0):
        return 1.0 - _incomplete_beta(b, a, 1.0 - x)
    tiny = 1e-300
    c, d = 1.0, 1.0 - (a + b) * x / (a + 1.0)
    d = 1.0 / (d if abs(d) > tiny else tiny)
    f = d
    for m in range(1, 300):
        for numerator in (
            m * (b - m) * x / ((a + 2 * m - 1) * (a + 2 * m)),
            -(a + m) * (a + b + m) * x / ((a + 2 * m) * (a + 2 * m + 1)),
        ):
            d = 1.0 + numerator * d
            d = 1.0 / (d if abs(d) > tiny else tiny)
            c = 1.0 + numerator / c
            c = c if abs(c) > tiny else tiny
            f *= c * d
        if abs(c * d - 1.0) < 1e-15:
            break
    return math.exp(log_front) * f / a
