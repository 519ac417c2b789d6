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

from rcdiag.metrics.ragged import F64, I64

MIN_TREND_STEPS = 6
"""With fewer non-null steps ``rise``/``fall`` are not tested (the rule is skipped)."""

MIN_SEGMENT = 2
"""A rise is sustained: at least this many steps before and after the change point."""

_COST_TIE = 1e-12
"""Split costs closer than this share of the one-segment cost (which bounds every split's) tie."""

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
    :data:`MIN_SEGMENT` values per side has a higher later median. Every split at once, in
    O(n log n): the median and the cost of every prefix and of every suffix
    (:func:`_prefix_medians`); the first split of least cost wins (costs equal up to rounding tie).

    Example:
        >>> median_split([1.0, 1.2, 5.0, 1.1, 1.0, 0.9, 1.5, 1.6, 1.4, 1.5])  # a spike at 2
        6
    """
    y = np.asarray(values, dtype=np.float64)
    n = y.size
    if n < 2 * MIN_SEGMENT:
        return None
    head_median, head_cost = _prefix_medians(y)
    tail_median, tail_cost = (a[::-1] for a in _prefix_medians(y[::-1]))
    # split t: head y[:t] is prefix t − 1, tail y[t:] is suffix t (both 0-based)
    t = np.arange(MIN_SEGMENT, n - MIN_SEGMENT + 1)
    cost = head_cost[t - 1] + tail_cost[t]
    cost = np.where((tail_median[t] > head_median[t - 1]) & (cost < math.inf), cost, math.inf)
    least = cost.min()
    if least == math.inf:
        return None
    # LAD costs tie exactly more often than not: ties, up to rounding, go to the first split
    return int(t[np.argmax(cost <= least + _COST_TIE * head_cost[-1])])


def _prefix_medians(y: F64) -> tuple[F64, F64]:
    """For every prefix y[:t] (t = 1…n): its median (as :func:`numpy.median`) and its least
    absolute deviation Σ_{i<t} |y_i − median|.

    With z the sorted prefix and h = ⌊t/2⌋ the deviation is (sum of the h largest) − (sum of the h
    smallest) = Σz − 2·Σ_{k<h} z_k − [t odd]·z_h. It is summed about the overall median, which
    changes nothing but keeps the sums small.
    """
    n = y.size
    t = np.arange(1, n + 1)
    ascending = np.sort(y)
    centre = ascending[(n - 1) // 2]
    centred = y - centre
    # order statistics ⌊t/2⌋ and ⌊(t − 1)/2⌋ of every prefix: its middle values (one when t is odd)
    at, below = _prefix_order_statistics(
        y, np.concatenate([t, t]), np.concatenate([t // 2, (t - 1) // 2]), centred
    )
    upper, lower = ascending[at[:n]], ascending[at[n:]]
    odd = t % 2 == 1
    median = np.where(odd, upper, (lower + upper) / 2.0)
    cost = np.cumsum(centred) - 2.0 * below[:n] - np.where(odd, upper - centre, 0.0)
    return median, cost


def _prefix_order_statistics(values: F64, ends: I64, ranks: I64, weights: F64) -> tuple[I64, F64]:
    """For each query j, among values[:ends[j]]: the position in ascending order of its
    ranks[j]-th smallest value (0-based), and the sum of ``weights`` over its ranks[j] smallest.

    A wavelet matrix over the values' ranks, O((n + queries) · log n) in whole-array steps: at each
    of ⌈log₂ n⌉ levels, from the highest bit of the rank down, the values are stably partitioned by
    that bit (zeros first); every query narrows its range to the side holding its order statistic,
    adding the weights of the zeros it passes when it takes the ones side.
    """
    n = values.size
    order = np.argsort(values, kind="stable")
    rank = np.empty(n, dtype=np.int64)
    rank[order] = np.arange(n)
    weight_of_rank = weights[order]
    lo, hi, k = np.zeros_like(ends), ends.copy(), ranks.copy()
    found = np.zeros_like(ends)
    below = np.zeros(ends.size)
    for level in reversed(range(max(1, (n - 1).bit_length()))):
        zero = (rank >> level) & 1 == 0
        zeros_before = np.concatenate([[0], np.cumsum(zero)])
        weight_before = np.concatenate(
            [[0.0], np.cumsum(np.where(zero, weight_of_rank[rank], 0.0))]
        )
        zeros_lo, zeros_hi = zeros_before[lo], zeros_before[hi]
        ones = k >= zeros_hi - zeros_lo
        below += np.where(ones, weight_before[hi] - weight_before[lo], 0.0)
        k = np.where(ones, k - (zeros_hi - zeros_lo), k)
        lo = np.where(ones, zeros_before[-1] + lo - zeros_lo, zeros_lo)
        hi = np.where(ones, zeros_before[-1] + hi - zeros_hi, zeros_hi)
        found = 2 * found + ones
        rank = np.concatenate([rank[zero], rank[~zero]])
    return found, below
