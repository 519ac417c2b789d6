"""The growth test (rcdiag/metrics/growth.py): a rise judged by the standard errors of the steps."""

from __future__ import annotations

import math

import numpy as np
import pytest

from rcdiag.metrics.distributions import _incomplete_beta, student_t_sf
from rcdiag.metrics.growth import MIN_GROWTH_STEPS, growth_test


def _ols_t(x: np.ndarray, y: np.ndarray) -> float:
    """The slope's t statistic by the textbook formulas, written separately."""
    n = x.size
    xm, ym = x.mean(), y.mean()
    sxx = float(((x - xm) ** 2).sum())
    slope = float(((x - xm) * (y - ym)).sum()) / sxx
    residual = y - (ym + slope * (x - xm))
    s2 = float((residual**2).sum()) / (n - 2)
    return slope / math.sqrt(s2 / sxx)


@pytest.mark.parametrize("seed", range(4))
def test_without_standard_errors_it_is_the_least_squares_t_test(seed: int) -> None:
    rng = np.random.default_rng(seed)
    x = np.arange(10, dtype=float)
    y = 1.0 + 0.05 * x + 0.1 * rng.standard_normal(10)  # negative values allowed: linear scale
    y -= 2.0
    found = growth_test(x, y, alpha=0.5)
    assert not found.log_scale and found.tested
    assert found.z == pytest.approx(_ols_t(x, y), rel=1e-9)


@pytest.mark.parametrize(
    ("t", "dof", "expected"),
    [
        (2.0, 4, 0.0580582617584),
        (1.0, 1, 0.25),
        (31.8205, 1, 0.01),
        (6.9646, 2, 0.01),
        (0.0, 7, 0.5),
    ],
)
def test_student_t_tail_matches_published_values(t: float, dof: int, expected: float) -> None:
    assert student_t_sf(t, dof) == pytest.approx(expected, rel=1e-4)
    assert student_t_sf(-t, dof) == pytest.approx(1.0 - expected, rel=1e-4)


def test_incomplete_beta_edges_and_symmetry() -> None:
    assert _incomplete_beta(2.0, 3.0, 0.0) == 0.0 and _incomplete_beta(2.0, 3.0, 1.0) == 1.0
    # I_x(1, 1) = x; I_x(a, b) = 1 − I_{1−x}(b, a)
    assert _incomplete_beta(1.0, 1.0, 0.3) == pytest.approx(0.3, rel=1e-12)
    assert _incomplete_beta(2.5, 0.5, 0.4) == pytest.approx(1 - _incomplete_beta(0.5, 2.5, 0.6))


def test_a_short_clear_rise_is_found_by_its_standard_errors() -> None:
    # four steps of ~20,000 tokens each, k3_kl ×700 from the first to the last
    k3 = [4e-5, 6e-4, 5e-3, 2.9e-2]
    se = [0.05 * v for v in k3]
    found = growth_test([0, 1, 2, 3], k3, 0.01, se)
    assert found.significant and found.shape == "ramp" and found.change_step is None
    assert found.relative_change > 100
    # eight steps, ×5, rising monotonically (0.051 → 0.272)
    k3 = np.geomspace(0.051, 0.272, 8) * (1 + 0.02 * np.array([1, -1, 1, -1, 1, -1, 1, -1]))
    assert growth_test(range(8), k3, 0.01, 0.03 * k3).significant


@pytest.mark.parametrize("seed", range(20))
def test_noise_over_fifty_steps_is_not_a_rise(seed: int) -> None:
    """Per-step values scatter far more than their (tiny) standard errors say: the between-step
    variance τ² absorbs it."""
    rng = np.random.default_rng(100 + seed)
    k3 = 1e-3 * np.exp(0.3 * rng.standard_normal(50))
    assert not growth_test(range(50), k3, 0.01, 0.01 * k3).significant


def test_false_alarms_stay_near_alpha() -> None:
    rng = np.random.default_rng(7)
    alarms = sum(
        growth_test(range(30), 1e-3 * np.exp(0.2 * rng.standard_normal(30)), 0.05, None).significant
        for _ in range(400)
    )
    assert alarms / 400 < 0.09


def test_a_step_change_is_named_and_a_ramp_is_not() -> None:
    rng = np.random.default_rng(1)
    level = np.where(np.arange(16) >= 10, 2.0, 1.0) * (1 + 0.03 * rng.standard_normal(16))
    step = growth_test(np.arange(100, 116), level, 0.05)
    assert step.significant and step.shape == "step" and step.change_step == 110
    assert step.relative_change == pytest.approx(1.0, abs=0.1)
    assert growth_test(np.arange(100, 116), level, 0.05, direction="fall").relative_change == 0.0
    t = np.linspace(0, 1, 20)
    ramp = growth_test(
        range(20), 1e-4 * (1 + 4 * t) ** 2 * (1 + 0.05 * rng.standard_normal(20)), 0.01
    )
    assert ramp.significant and ramp.shape == "ramp" and ramp.change_step is None
    assert growth_test(range(20), np.linspace(1.0, 3.0, 20), 0.05).shape == "ramp"


def test_falls_gaps_spikes_and_short_series() -> None:
    rng = np.random.default_rng(3)
    falling = np.where(np.arange(16) >= 6, 0.5, 1.0) * (1 + 0.02 * rng.standard_normal(16))
    fall = growth_test(range(16), falling, 0.05, direction="fall")
    assert fall.significant and fall.shape == "step" and fall.change_step == 6
    assert fall.relative_change == pytest.approx(0.5, abs=0.05)
    gaps = np.where(np.arange(16) >= 10, 2.0, 1.0) * (1 + 0.02 * rng.standard_normal(16))
    gaps[[2, 12]] = np.nan  # steps without valid tokens
    assert growth_test(range(16), gaps, 0.05).change_step == 10
    flat = 1 + 0.05 * rng.standard_normal(16)
    spiky = flat.copy()
    spiky[[3, 8, 15]] = 50.0  # isolated heavy-tailed steps, the last one too
    found = growth_test(range(16), spiky, 0.05)
    assert not found.significant and found.spikes == (3, 8, 15)
    too_short = growth_test(range(MIN_GROWTH_STEPS - 1), [1.0, 9.0], 0.05)
    assert not too_short.tested and too_short.reason and "needs 3" in too_short.reason


def test_a_concave_rise_of_few_steps_is_a_rise() -> None:
    """A real run whose rollouts grow stale: k3_kl jumps at the second step and keeps climbing; a
    line on the log scale fits it badly, every step is still far above the one before."""
    k3 = [4.04e-5, 6.94e-3, 2.6e-2, 5.4e-2, 0.11]
    se = [2e-6, 4.2e-4, 1.36e-3, 2.52e-3, 5.85e-3]
    for steps in (4, 5):
        found = growth_test(range(steps), k3[:steps], 0.01, se[:steps])
        assert found.significant and found.shape == "ramp", steps
        assert found.after == pytest.approx(k3[steps - 1]) and found.before == pytest.approx(k3[0])


@pytest.mark.parametrize("steps", [3, 4, 5, 8])
def test_flat_runs_with_between_step_scatter_are_rarely_rises(steps: int) -> None:
    """Per-step k3_kl scattering ×e^{±0.3} (twice what real runs show) with 5% standard errors:
    the slope test and the monotone rule together stay under 2% false alarms at α = 0.01."""
    rng = np.random.default_rng(steps)
    runs = 2000
    alarms = 0
    for _ in range(runs):
        k3 = 1e-3 * np.exp(0.3 * rng.standard_normal(steps))
        alarms += growth_test(range(steps), k3, 0.01, 0.05 * k3).significant
    assert alarms / runs < 0.02


@pytest.mark.parametrize("steps", [4, 5, 6, 8])
def test_a_step_change_in_a_short_run_is_a_rise_at_its_step(steps: int) -> None:
    """Half the steps low, half ×16 higher, 5% standard errors and a little scatter: the line's
    residuals inflate its slope's variance, the two levels are many standard errors apart."""
    rng = np.random.default_rng(steps)
    change = steps // 2
    k3 = np.where(np.arange(steps) >= change, 16e-4, 1e-4) * np.exp(
        0.05 * rng.standard_normal(steps)
    )
    found = growth_test(range(steps), k3, 0.01, 0.05 * k3)
    assert found.significant and found.shape == "step" and found.change_step == change
    assert found.after / found.before == pytest.approx(16, rel=0.2)


@pytest.mark.parametrize("steps", [4, 5, 6, 7])
def test_flat_short_runs_are_rarely_step_changes(steps: int) -> None:
    """The step-change test picks its split after looking: Bonferroni keeps its false alarms on
    flat runs (×e^{±0.3} scatter, 5% standard errors) under 2% at α = 0.01, with or without
    standard errors."""
    rng = np.random.default_rng(50 + steps)
    runs = 2000
    alarms = 0
    for i in range(runs):
        k3 = 1e-3 * np.exp(0.3 * rng.standard_normal(steps))
        alarms += growth_test(range(steps), k3, 0.01, 0.05 * k3 if i % 2 else None).significant
    assert alarms / runs < 0.02


def _slow_spikes(y: np.ndarray, log_scale: bool) -> np.ndarray:
    """The spike rule step by step, with numpy's median of each neighbourhood (a reference)."""
    from rcdiag.metrics import growth

    n = y.size
    flags = np.zeros(n, dtype=bool)
    if n < growth.MIN_SPIKE_STEPS:
        return flags
    rough = [y[i] - np.median(np.r_[y[max(0, i - 2) : i], y[i + 1 : i + 3]]) for i in range(n)]
    spread = 1.4826 * float(np.median(np.abs(rough)))
    threshold = max(growth.SPIKE_SCALE * spread, growth.SPIKE_FLOOR if log_scale else 0.0)
    if threshold == 0.0:
        return flags
    for i in range(1, n - 1):
        left = y[i] - float(np.median(y[max(0, i - 2) : i]))
        right = y[i] - float(np.median(y[i + 1 : i + 3]))
        flags[i] = left * right > 0 and min(abs(left), abs(right)) > threshold
    end = threshold * math.sqrt(6.0)
    flags[0] = abs(y[0] - (2.0 * y[1] - y[2])) > end
    flags[-1] = abs(y[-1] - (2.0 * y[-2] - y[-3])) > end
    return flags & ~(np.r_[False, flags[:-1]] | np.r_[flags[1:], False])


@pytest.mark.parametrize("seed", range(4))
def test_spikes_at_every_step_at_once_match_the_step_by_step_rule(seed: int) -> None:
    from rcdiag.metrics.growth import _spikes

    rng = np.random.default_rng(seed)
    for trial in range(300):
        n = int(rng.integers(1, 30))
        y = rng.normal(size=n) + (rng.random(n) < 0.15) * rng.normal(0, 8, n)
        if trial % 3 == 0:
            y = np.round(y)  # ties in the neighbourhoods
        if trial % 7 == 0 and n:
            y[rng.integers(n)] = math.nan
        for log_scale in (True, False):
            np.testing.assert_array_equal(_spikes(y, log_scale), _slow_spikes(y, log_scale))
