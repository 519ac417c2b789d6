"""Is a per-step figure growing? One test, judged by the evidence inside the steps.

A step of a dump holds thousands of tokens, so its value comes with a standard error (for k3_kl the
sequence-clustered one, ``rcdiag/k3_kl_stderr``). A rise is judged by how many standard errors wide
it is, not by how many steps there are: four steps of tens of thousands of tokens that rise ×700
are a rise; fifty steps of noise are not.

**The model.** On y_s = log v_s (when every value is positive; else v_s itself), with sampling
variances σ²_s = (se_s / v_s)² (the delta method; 0 without standard errors), the steps follow a
line y_s = a + b·s with between-step variance τ² beyond sampling (a batch's prompts differ from the
next one's):

.. math::
    y_s \\sim \\mathcal{N}(a + b\\,s,\\; \\sigma_s^2 + \\tau^2),

τ² by DerSimonian–Laird from the residuals of the fit weighted by 1/σ²_s. The slope b is
estimated with weights w_s = 1/(σ²_s + τ²) and its variance scaled by max(1, Q_w / (k − 2))
(Knapp–Hartung), Q_w the weighted residual sum of squares; the one-sided p-value of b / se(b) is
Student's t with k − 2 degrees of freedom. Without standard errors this is ordinary least squares
and its t-test.

**Spikes.** A step above (or below) both the two steps before it and the two after it (an end
step: off the line through its two neighbours) by more than :data:`SPIKE_SCALE` robust standard
deviations of the steps around their running median (and more than :data:`SPIKE_FLOOR` on the log
scale) is an isolated spike: it is left out of the fit and listed.

**A monotone rise.** A line on the log scale fits a concave rise badly (a run that jumps at its
second step and keeps climbing), which inflates τ². So a series whose every step lies above the one
before by more than :data:`MONOTONE_Z` combined standard errors, and whose last step is at least
:data:`MONOTONE_RATIO` times its first, is a rise too (a ramp, sized from the first step to the
last): noise, even between steps that differ far beyond their standard errors, orders k steps
monotonically with probability 1/k! at most, and rarely spans a factor 3.

**A ramp or a step change?** The same weights fit two constant levels split at the best step (at
least :data:`MIN_SEGMENT` steps each side). The rise is a step change only when that fit leaves at
most 1/:data:`STEP_RATIO` of the line's residual sum of squares; then its first step is named and
the rise is the change of the two levels. Otherwise it is a ramp, sized by the fitted line from
the first step to the last.

**A step change the line misses.** On a short run a shift at one step (three steps low, three
high) leaves the line large residuals, which inflate τ² and the slope's variance: the slope test
misses what the two levels show many standard errors apart. So when the two-level fit is the
better one, the change of the levels is tested too, with τ² re-estimated from the two-level
residuals (DerSimonian–Laird, k − 2 degrees of freedom), its variance 1/Σw_before + 1/Σw_after
scaled by max(1, Q_w / (k − 2)) as for the slope, Student's t with k − 2 degrees of freedom, and
its p-value multiplied by the number of splits tried (Bonferroni: the split was chosen after
looking); it must fall below α/2, so the two tests together stay near α (flat runs of 4–8 steps
with ×e^{±0.3} scatter: at most 1.7% alarms at α = 0.01, tests/test_growth.py).
"""

from __future__ import annotations

import math
from dataclasses import dataclass
from typing import Literal

import numpy as np
from numpy.typing import ArrayLike

from rcdiag.metrics.distributions import median, student_t_sf
from rcdiag.metrics.ragged import F64

MIN_GROWTH_STEPS = 3
"""Fewer steps with a value are not tested (a line through two points has no residual)."""
MIN_SEGMENT = 2
"""A step change has at least this many steps on each side."""
STEP_RATIO = 4.0
"""A step change must explain the steps this many times better than a line (residual sums)."""
SPIKE_SCALE = 6.0
"""An isolated step is a spike past this many robust standard deviations of second differences."""
SPIKE_FLOOR = 1.0
"""… and past this on the log scale (a factor e ≈ 2.7), or the linear scale's robust spread."""
MIN_SPIKE_STEPS = 5
"""Spikes are looked for only in series of at least this many steps."""
MONOTONE_Z = 3.0
"""A monotone rise: every step above the one before by more than this many standard errors…"""
MONOTONE_RATIO = 3.0
"""… and the last step at least this many times the first."""

Shape = Literal["ramp", "step", "none"]


@dataclass(frozen=True)
class Growth:
    """The outcome of :func:`growth_test`.

    Attributes:
        tested: enough steps with a value to test (else ``reason`` says why not).
        significant: the one-sided test rejects "no rise" (or "no fall") at level α.
        shape: ``ramp`` (a sustained slope), ``step`` (a shift at one step) or ``none``.
        change_step: the first step after a step change (None for a ramp).
        p_value: of the one-sided slope test; z: the slope over its standard error.
        before, after: the level at the start and at the end (fitted line for a ramp, the two
            levels for a step change), on the metric's own scale.
        relative_change: (after − before) / |before| in the tested direction; 0 when not
            significant; ``inf`` when ``before`` is 0.
        steps: how many steps were fitted; spikes: the isolated spike steps left out.
        log_scale: whether the fit was on log values.
        reason: why no test was made.
    """

    tested: bool
    significant: bool
    shape: Shape
    change_step: int | None
    p_value: float
    z: float
    before: float | None
    after: float | None
    relative_change: float
    steps: int
    spikes: tuple[int, ...] = ()
    log_scale: bool = False
    reason: str | None = None


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


def not_tested(reason: str, steps: int = 0) -> Growth:
    """The outcome when no test can be made."""
    return Growth(False, False, "none", None, 1.0, 0.0, None, None, 0.0, steps, reason=reason)


def growth_test(
    steps: ArrayLike,
    values: ArrayLike,
    alpha: float,
    stderrs: ArrayLike | None = None,
    direction: Literal["rise", "fall"] = "rise",
) -> Growth:
    """Test per-step values for a sustained rise (or fall) against their standard errors.

    Args:
        steps: step numbers, increasing.
        values: the figure at each step; NaN (a step without valid tokens) is skipped.
        alpha: level of the one-sided test.
        stderrs: each step's standard error (None: unknown, the scatter of the steps decides).
        direction: ``rise`` or ``fall``.

    Example:
        >>> g = growth_test([0, 1, 2, 3], [4e-5, 5e-4, 4e-3, 2.9e-2], 0.01,
        ...                 stderrs=[2e-6, 2e-5, 2e-4, 1e-3])
        >>> g.significant, g.shape, round(g.after / g.before)
        (True, 'ramp', 697)
        >>> growth_test(range(6), [1.0, 1.02, 0.98, 1.01, 0.99, 1.0], 0.01).significant
        False
    """
    x = np.asarray(steps, dtype=np.float64)
    v = np.asarray(values, dtype=np.float64)
    se = np.zeros_like(v) if stderrs is None else np.asarray(stderrs, dtype=np.float64)
    keep = np.isfinite(v) & np.isfinite(se)
    x, v, se = x[keep], v[keep], se[keep]
    if v.size < MIN_GROWTH_STEPS:
        return not_tested(
            f"{v.size} step(s) with a value (a test needs {MIN_GROWTH_STEPS})", v.size
        )
    log_scale = bool((v > 0).all())
    y = np.log(v) if log_scale else v.copy()
    var = np.square(se / v) if log_scale else np.square(se)
    sign = 1.0 if direction == "rise" else -1.0
    spikes = _spikes(y, log_scale)
    spike_steps = tuple(int(s) for s in x[spikes])
    x, y, var = x[~spikes], y[~spikes], var[~spikes]
    if y.size < MIN_GROWTH_STEPS:
        return not_tested("too few steps once the spikes are left out", y.size)
    weights, slope, slope_var, line_rss = _random_effects_line(x, sign * y, var)
    k = y.size
    z = slope / math.sqrt(slope_var) if slope_var > 0 else (math.inf if slope > 0 else 0.0)
    p_value = student_t_sf(z, k - 2) if math.isfinite(z) else (0.0 if z > 0 else 1.0)
    split = _best_split(sign * y, weights, line_rss)
    if split is not None:
        shape: Shape = "step"
        change_step: int | None = int(x[split])
        w_before, w_after = weights[:split], weights[split:]
        before_y = float(w_before @ y[:split] / w_before.sum())
        after_y = float(w_after @ y[split:] / w_after.sum())
    else:
        shape, change_step = "ramp", None
        intercept = float(weights @ (sign * y - slope * x) / weights.sum())
        before_y = sign * (intercept + slope * x[0])
        after_y = sign * (intercept + slope * x[-1])
    before = math.exp(before_y) if log_scale else before_y
    after = math.exp(after_y) if log_scale else after_y
    significant = p_value < alpha and sign * (after - before) > 0
    if not significant and split is not None:
        p_step, z_step = _step_change(sign * y, var, split)
        if p_step < alpha / 2:  # a second test: half the level, so both together stay near α
            significant, p_value, z = True, p_step, z_step
    if not significant and _monotone(sign * y, var):
        # every step clearly above the one before: a rise whatever its shape (a line on the log
        # scale may fit a concave rise badly); sized from the first step to the last
        significant, shape, change_step = True, "ramp", None
        before = math.exp(y[0]) if log_scale else float(y[0])
        after = math.exp(y[-1]) if log_scale else float(y[-1])
    if not significant:
        return Growth(
            True, False, "none", None, p_value, z, before, after, 0.0, k, spike_steps, log_scale
        )
    change = sign * (after - before)
    relative = change / abs(before) if before != 0 else math.inf
    return Growth(
        True,
        True,
        shape,
        change_step,
        p_value,
        z,
        before,
        after,
        relative,
        k,
        spike_steps,
        log_scale,
    )


def _monotone(y: F64, var: F64) -> bool:
    """Every step above the one before by more than :data:`MONOTONE_Z` combined standard errors,
    and the last :data:`MONOTONE_RATIO` times the first (on the log scale; standard errors needed:
    without them the scatter of the steps is all there is, and the slope test decides)."""
    if not (var > 0).all():
        return False
    rises = np.diff(y)
    noise = np.sqrt(var[:-1] + var[1:])
    return bool((rises > MONOTONE_Z * noise).all() and y[-1] - y[0] >= math.log(MONOTONE_RATIO))


def _spikes(y: F64, log_scale: bool) -> np.ndarray:
    """Isolated steps off both sides of the series (module docstring): an inner step that lies
    above (or below) the medians of the two steps before it and of the two after it by more than
    the threshold, an end step that far from the line through its two neighbours."""
    n = y.size
    flags = np.zeros(n, dtype=bool)
    if n < MIN_SPIKE_STEPS:
        return flags
    # the noise around the median of the four nearest steps: a ramp leaves little, a spike none
    rough = y - _neighbour_medians(y)
    spread = 1.4826 * median(np.abs(rough))
    threshold = max(SPIKE_SCALE * spread, SPIKE_FLOOR if log_scale else 0.0)
    if threshold == 0.0:
        return flags
    # the medians of the (up to) two steps before and after each inner step: their means
    before = np.r_[y[0], (y[:-3] + y[1:-2]) / 2.0]
    after = np.r_[(y[2:-1] + y[3:]) / 2.0, y[-1]]
    left, right = y[1:-1] - before, y[1:-1] - after
    flags[1:-1] = (left * right > 0) & (np.minimum(np.abs(left), np.abs(right)) > threshold)
    # an end against the line through its two neighbours, whose noise is √6 times a step's
    end = threshold * math.sqrt(6.0)
    flags[0] = abs(y[0] - (2.0 * y[1] - y[2])) > end
    flags[-1] = abs(y[-1] - (2.0 * y[-2] - y[-3])) > end
    # isolated: two flagged steps in a row are a new level, not spikes
    neighbours = np.zeros(n, dtype=bool)
    neighbours[1:] |= flags[:-1]
    neighbours[:-1] |= flags[1:]
    return flags & ~neighbours


def _neighbour_medians(y: F64) -> F64:
    """The median of each step's (up to) four nearest steps: two before it and two after it, at
    every step at once (the inner steps' four sorted; the two steps at each end apart)."""
    n = y.size
    out = np.empty(n)
    if n > 4 and not np.isnan(y).any():  # NaN would sort last instead of giving NaN
        window = np.sort(np.column_stack([y[:-4], y[1:-3], y[3:-1], y[4:]]), axis=1)
        out[2:-2] = (window[:, 1] + window[:, 2]) / 2.0
        ends = [0, 1, n - 2, n - 1]
    else:
        ends = list(range(n))
    for i in ends:
        out[i] = median(np.r_[y[max(0, i - 2) : i], y[i + 1 : i + 3]])
    return out


def _random_effects_line(x: F64, y: F64, var: F64) -> tuple[F64, float, float, float]:
    """Weights, slope, the slope's (Knapp–Hartung scaled) variance and the weighted residual sum
    of squares of the random-effects line (module docstring)."""
    k = y.size
    design = np.column_stack([np.ones(k), x - x.mean()])
    if (var > 0).all():
        w0 = 1.0 / var
        _, rss0 = _wls(design, y, w0)
        information = design.T @ (design * w0[:, None])
        trace = w0.sum() - float(
            np.trace(np.linalg.solve(information, design.T @ (design * (w0 * w0)[:, None])))
        )
        tau2 = max(0.0, (rss0 - (k - 2)) / trace) if trace > 0 else 0.0
        weights = 1.0 / (var + tau2)
        scale_free = False
    else:  # no standard errors: ordinary least squares
        weights = np.ones(k)
        scale_free = True
    beta, rss = _wls(design, y, weights)
    information = design.T @ (design * weights[:, None])
    covariance = np.linalg.inv(information)
    dof = k - 2
    factor = rss / dof if scale_free else max(1.0, rss / dof) if dof > 0 else 1.0
    if dof <= 0:
        factor = math.inf if scale_free else 1.0
    slope_var = float(covariance[1, 1]) * factor
    return weights, float(beta[1]), slope_var, rss


def _wls(design: F64, y: F64, weights: F64) -> tuple[F64, float]:
    """Weighted least-squares coefficients and weighted residual sum of squares."""
    information = design.T @ (design * weights[:, None])
    beta = np.linalg.solve(information, design.T @ (weights * y))
    residual = y - design @ beta
    return beta, float(weights @ (residual * residual))


def _best_split(y: F64, weights: F64, line_rss: float) -> int | None:
    """The split of the best two-level fit when it beats the line :data:`STEP_RATIO` times (and
    the later level is the higher), else None."""
    k = y.size
    if k < 2 * MIN_SEGMENT:
        return None
    wy, wyy = np.cumsum(weights * y), np.cumsum(weights * y * y)
    wc = np.cumsum(weights)
    t = np.arange(MIN_SEGMENT, k - MIN_SEGMENT + 1)
    head_w, head_wy, head_wyy = wc[t - 1], wy[t - 1], wyy[t - 1]
    tail_w, tail_wy, tail_wyy = wc[-1] - head_w, wy[-1] - head_wy, wyy[-1] - head_wyy
    rss = (head_wyy - head_wy**2 / head_w) + (tail_wyy - tail_wy**2 / tail_w)
    rises = tail_wy / tail_w > head_wy / head_w
    rss = np.where(rises, rss, np.inf)
    best = int(np.argmin(rss))
    if not np.isfinite(rss[best]) or rss[best] * STEP_RATIO > line_rss:
        return None
    return int(t[best])


def _step_change(y: F64, var: F64, split: int) -> tuple[float, float]:
    """The one-sided p-value (Bonferroni over the splits tried) and t of the rise of the later
    level over the earlier one, split before position ``split`` (module docstring)."""
    k = y.size
    parts = (slice(None, split), slice(split, None))
    if (var > 0).all():
        w0 = 1.0 / var
        rss0 = sum(_level_rss(y[g], w0[g]) for g in parts)
        trace = sum(float(w0[g].sum() - (w0[g] ** 2).sum() / w0[g].sum()) for g in parts)
        tau2 = max(0.0, (rss0 - (k - 2)) / trace) if trace > 0 else 0.0
        weights = 1.0 / (var + tau2)
        scale_free = False
    else:
        weights = np.ones(k)
        scale_free = True
    before, after = (float(weights[g] @ y[g] / weights[g].sum()) for g in parts)
    rss = sum(_level_rss(y[g], weights[g]) for g in parts)
    dof = k - 2
    factor = rss / dof if scale_free else max(1.0, rss / dof)
    variance = (1.0 / weights[parts[0]].sum() + 1.0 / weights[parts[1]].sum()) * factor
    if variance <= 0:
        return (0.0, math.inf) if after > before else (1.0, 0.0)
    t = (after - before) / math.sqrt(variance)
    tried = k - 2 * MIN_SEGMENT + 1
    return min(1.0, tried * student_t_sf(t, dof)), t


def _level_rss(y: F64, weights: F64) -> float:
    """Weighted residual sum of squares of ``y`` around its weighted mean."""
    mean = float(weights @ y / weights.sum())
    return float(weights @ np.square(y - mean))
