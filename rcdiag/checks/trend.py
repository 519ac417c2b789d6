"""Drift across the steps of one dump: least-squares slope and a robust change-point test.

Per-step values are few (one per verl batch) and often heavy-tailed (one catastrophic token moves a
step's χ²), so detection is on ranks and location on medians.

**Is there a sustained rise?** The one-sided **Pettitt test** (Pettitt 1979, *Applied Statistics*
28:126): for every split of the n values into an earlier part x₁…x_t and a later part x_{t+1}…x_n,
the Mann–Whitney statistic

.. math::
    U_t = \\sum_{i \\le t} \\sum_{j > t} \\operatorname{sign}(x_j - x_i)

counts how much later values exceed earlier ones; K = max_t U_t. Its one-sided p-value is exact up
to Monte-Carlo error for up to :data:`PERMUTATION_MAX_STEPS` steps: the share of
:data:`PERMUTATIONS` random orderings of the same values (a fixed seed, so reproducible) whose K is at
least as large, (1 + #{K_π ≥ K}) / (1 + P). Beyond that, Pettitt's approximation
p ≈ exp(−6K² / (n³ + n²)), conservative for short series. A rise is significant when p < α.

**Where did it begin?** Ranks locate a jump only roughly when it is small against the noise, so the
first step of the rise is the split of the least-absolute-deviation fit of two constant segments

.. math::
    t^* = \\arg\\min_t \\sum_{i \\le t} |x_i - m_{\\le t}| + \\sum_{i > t} |x_i - m_{> t}|,
    \\qquad m = \\text{segment median},

over splits with at least :data:`MIN_SEGMENT` steps on each side and m_{>t} > m_{≤t} (a binary-
segmentation step with a robust cost). The size of the rise is the relative change of the medians,
(m_{>t*} − m_{≤t*}) / |m_{≤t*}|. A fall is a rise of −x.

Fewer than :data:`MIN_TREND_STEPS` values are never tested.
"""

from __future__ import annotations

import math
from dataclasses import dataclass
from typing import Literal

import numpy as np
from numpy.typing import ArrayLike

from rcdiag.metrics.ragged import F64

MIN_TREND_STEPS = 6
"""With fewer non-null steps ``rise``/``fall`` are not tested (the rule is skipped)."""

MIN_SEGMENT = 2
"""A rise is sustained: at least this many steps before and after the change point."""

PERMUTATIONS = 1999
"""Random orderings behind the permutation p-value (its resolution is 1/2000)."""
PERMUTATION_SEED = 20260131
"""Fixed: the same values always get the same p-value."""
PERMUTATION_MAX_STEPS = 1000
"""Longer series use Pettitt's closed-form approximation (memory: PERMUTATIONS × steps)."""


def _finite(steps: ArrayLike, values: ArrayLike) -> tuple[F64, F64]:
    x = np.asarray(steps, dtype=np.float64)
    y = np.asarray(values, dtype=np.float64)
    keep = np.isfinite(y)
    return x[keep], y[keep]


def least_squares_slope(steps: ArrayLike, values: ArrayLike) -> float | None:
    """Slope β of the least-squares line y ≈ α + β·step, NaN values skipped.

    .. math::
        \\beta = \\frac{\\sum_s (s - \\bar s)(y_s - \\bar y)}{\\sum_s (s - \\bar s)^2}

    Returns ``None`` with fewer than two distinct steps.

    Example:
        >>> least_squares_slope([0, 1, 2, 3], [1.0, 3.0, float("nan"), 7.0])
        2.0
    """
    x, y = _finite(steps, values)
    if x.size < 2 or np.ptp(x) == 0:
        return None
    dx = x - x.mean()
    return float(dx @ (y - y.mean()) / (dx @ dx))


@dataclass(frozen=True)
class ChangePoint:
    """The most significant split of a series into a lower earlier part and a higher later part.

    Attributes:
        index: position (in the series) of the first value of the later part.
        statistic: Pettitt's K = max_t U_t (≤ 0: no split has later values above earlier ones).
        p_value: one-sided p-value of K.
    """

    index: int
    statistic: float
    p_value: float


def _ranks_sum(x: F64) -> F64:
    """r_i = #{j: x_j > x_i} − #{j: x_j < x_i} (ties count for neither)."""
    ordered = np.sort(x)
    greater = x.size - np.searchsorted(ordered, x, side="right")
    less = np.searchsorted(ordered, x, side="left")
    return (greater - less).astype(np.float64)


def pettitt(values: ArrayLike) -> ChangePoint:
    """One-sided Pettitt change-point test for a rise (module docstring).

    With r_i = #{j: x_j > x_i} − #{j: x_j < x_i}, pairs inside the earlier part cancel, so
    U_t = Σ_{i ≤ t} r_i, a cumulative sum; a permutation of the values permutes r, so the
    permutation distribution of K costs one cumulative sum per permutation.

    Example:
        >>> cp = pettitt([1.0, 1.1, 0.9, 1.0, 1.05, 0.95, 3.0, 3.1, 2.9, 3.2])
        >>> cp.index, cp.statistic, cp.p_value < 0.05
        (6, 24.0, True)
        >>> pettitt([3.0, 2.0, 1.0]).p_value
        1.0
    """
    x = np.asarray(values, dtype=np.float64)
    n = x.size
    if n < 2:
        return ChangePoint(0, 0.0, 1.0)
    r = _ranks_sum(x)
    u = np.cumsum(r)[:-1]
    t = int(np.argmax(u))
    k = float(u[t])
    if k <= 0:
        return ChangePoint(t + 1, k, 1.0)
    if n <= PERMUTATION_MAX_STEPS:
        rng = np.random.default_rng(PERMUTATION_SEED)
        shuffled = rng.permuted(np.broadcast_to(r, (PERMUTATIONS, n)), axis=1)
        k_null = np.cumsum(shuffled, axis=1)[:, :-1].max(axis=1)
        exceed = int(np.count_nonzero(k_null >= k - 1e-9))
        return ChangePoint(t + 1, k, (1.0 + exceed) / (1.0 + PERMUTATIONS))
    return ChangePoint(t + 1, k, min(1.0, math.exp(-6.0 * k * k / (n**3 + n**2))))


@dataclass(frozen=True)
class Trend:
    """A sustained rise (or fall) over steps, or its absence.

    Attributes:
        significant: the change-point test rejects "no change" at level α.
        change_step: the first step of the later part (the step where the rise began).
        p_value: of the one-sided Pettitt test.
        before, after: medians of the metric before and from ``change_step`` on.
        relative_change: (after − before) / |before| for a rise, (before − after) / |before| for a
            fall; ``inf`` when ``before`` is 0 and the metric moved; 0 when not significant.
    """

    significant: bool
    change_step: int | None
    p_value: float
    before: float | None
    after: float | None
    relative_change: float


NO_TREND = Trend(False, None, 1.0, None, None, 0.0)


def detect_trend(
    steps: ArrayLike,
    values: ArrayLike,
    alpha: float,
    direction: Literal["rise", "fall"] = "rise",
) -> Trend:
    """Test the per-step values for a sustained rise (or fall) and locate where it began.

    Args:
        steps: step numbers, increasing.
        values: the metric at each step; NaN (a step without valid tokens) is skipped.
        alpha: significance level of the one-sided test.
        direction: ``rise`` or ``fall``.

    Example:
        >>> t = detect_trend(range(12), [1.0] * 3 + [1.1, 0.9] * 3 + [2.0, 2.1, 1.9], alpha=0.05)
        >>> t.significant, t.change_step, round(t.relative_change, 3)
        (True, 9, 1.0)
    """
    x, y = _finite(steps, values)
    if y.size < MIN_TREND_STEPS:
        return NO_TREND
    sign = 1.0 if direction == "rise" else -1.0
    p_value = pettitt(sign * y).p_value
    split = median_split(sign * y)
    if split is None:
        return Trend(False, None, p_value, None, None, 0.0)
    before = float(np.median(y[:split]))
    after = float(np.median(y[split:]))
    step = int(x[split])
    if p_value >= alpha:
        return Trend(False, step, p_value, before, after, 0.0)
    change = sign * (after - before)
    relative = change / abs(before) if before != 0 else math.inf
    return Trend(True, step, p_value, before, after, relative)


def median_split(values: ArrayLike) -> int | None:
    """The first index of the later segment of the best two-median fit with a higher later median.

    Least absolute deviations (module docstring); ``None`` when no split of at least
    :data:`MIN_SEGMENT` values per side has a higher later median. One pass per candidate split.

    Example:
        >>> median_split([1.0, 1.2, 5.0, 1.1, 1.0, 0.9, 1.5, 1.6, 1.4, 1.5])  # a spike at 2
        6
    """
    y = np.asarray(values, dtype=np.float64)
    best: int | None = None
    best_cost = math.inf
    for t in range(MIN_SEGMENT, y.size - MIN_SEGMENT + 1):
        head, tail = y[:t], y[t:]
        low, high = np.median(head), np.median(tail)
        if not high > low:
            continue
        cost = float(np.abs(head - low).sum() + np.abs(tail - high).sum())
        if cost < best_cost:
            best, best_cost = t, cost
    return best
