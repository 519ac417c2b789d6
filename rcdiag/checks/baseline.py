"""Baselines: a reference run's metrics with bootstrap replicates, and the drift decision against it.

The baseline itself, its JSON and its validation, is :class:`rcdiag.model.Baseline`.

**Decision rule.** For a metric with baseline value b and current value c, the tolerance is
τ = max(τ_abs, τ_rel·|b|) and Δ = c − b. With bootstrap replicates of both runs, [L, H] is the central
``confidence`` interval of Δ (:func:`~rcdiag.metrics.bootstrap.difference_interval`). A rule
``x <= baseline`` fails when L > τ: the current run is higher than the baseline by more than the
tolerance, with the interval excluding noise. ``x >= baseline`` fails when H < −τ; ``x == baseline``
fails on either. Without replicates (a maximum or a quantile) the point difference Δ takes the place
of L and H. With ``abs(…)``, |·| is applied to every value and replicate first.
"""

from __future__ import annotations

import math
from collections.abc import Mapping
from dataclasses import dataclass
from datetime import datetime, timezone

import numpy as np

from rcdiag.checks.rules import Direction
from rcdiag.errors import UsageError
from rcdiag.metrics.bootstrap import bootstrapped, difference_interval
from rcdiag.metrics.ragged import F64
from rcdiag.model import AnalysisResult, Baseline


def make_baseline(
    analysis: AnalysisResult,
    replicates: Mapping[str, F64],
    *,
    seed: int,
    created: datetime,
) -> Baseline:
    """The baseline ``rcdiag baseline`` writes (its ``to_json()``).

    Args:
        analysis: the analyze result of the reference dump.
        replicates: metric → K bootstrap replicates (non-bootstrapped metrics are dropped).
        seed: the bootstrap seed.
        created: when (timezone-aware; written in ISO 8601 UTC).
    """
    kept = bootstrapped(replicates)
    count = next(iter(replicates.values())).size if replicates else 0
    return Baseline(
        dialect=analysis.dialect,
        rcdiag_version=analysis.rcdiag_version,
        created=created.astimezone(timezone.utc).strftime("%Y-%m-%dT%H:%M:%SZ"),
        source=analysis.source,
        options=analysis.options,
        overall=analysis.overall,
        step_results=analysis.step_results,
        seed=seed,
        replicates=count,
        bootstrap={name: np.asarray(reps, dtype=np.float64) for name, reps in kept.items()},
        diagnosis=analysis.diagnosis,
    )


def check_compatible(
    baseline: Baseline, dialect: str, effective_veto_threshold: float, origin: str
) -> None:
    """Refuse a baseline whose numbers do not mean the same as the current run's.

    Raises:
        UsageError: another dialect or another veto threshold.
    """
    if baseline.dialect != dialect:
        raise UsageError(
            f"{origin}: the baseline was made with --dialect {baseline.dialect}, this run uses "
            f"--dialect {dialect}; metrics of different dialects are not comparable"
        )
    if not math.isclose(baseline.effective_veto_threshold, effective_veto_threshold):
        raise UsageError(
            f"{origin}: the baseline used veto threshold {baseline.effective_veto_threshold:g}, "
            f"this run {effective_veto_threshold:g}; pass the same --veto-threshold"
        )


@dataclass(frozen=True)
class Drift:
    """The comparison of one metric with its baseline.

    Attributes:
        baseline, current: the point values (after ``abs`` when asked).
        delta: current − baseline.
        tolerance: τ = max(τ_abs, τ_rel·|baseline|).
        interval: the bootstrap interval of delta, or None (tolerance-only comparison).
        regressed: whether the rule fails.
    """

    baseline: float
    current: float
    delta: float
    tolerance: float
    interval: tuple[float, float] | None
    regressed: bool


def compare(
    current: float,
    baseline: float,
    direction: Direction,
    *,
    abs_tol: float,
    rel_tol: float,
    confidence: float,
    current_replicates: F64 | None = None,
    baseline_replicates: F64 | None = None,
    absolute: bool = False,
) -> Drift:
    """Apply the decision rule of the module docstring to one metric.

    Example:
        >>> rng = np.random.default_rng(0)
        >>> b = rng.normal(1.0, 0.05, 200)
        >>> compare(1.02, 1.0, "higher", abs_tol=0, rel_tol=0.1, confidence=0.95,
        ...         current_replicates=b + 0.02, baseline_replicates=rng.normal(1.0, 0.05, 200)).regressed
        False
        >>> compare(2.0, 1.0, "higher", abs_tol=0, rel_tol=0.1, confidence=0.95,
        ...         current_replicates=2 * b, baseline_replicates=b).regressed
        True
    """
    if absolute:
        current, baseline = abs(current), abs(baseline)
        if current_replicates is not None:
            current_replicates = np.abs(current_replicates)
        if baseline_replicates is not None:
            baseline_replicates = np.abs(baseline_replicates)
    delta = current - baseline
    tolerance = max(abs_tol, rel_tol * abs(baseline))
    interval = None
    if current_replicates is not None and baseline_replicates is not None:
        interval = difference_interval(current_replicates, baseline_replicates, confidence)
    low, high = interval if interval is not None else (delta, delta)
    up = low > tolerance
    down = high < -tolerance
    regressed = {"higher": up, "lower": down, "either": up or down}[direction]
    return Drift(baseline, current, delta, tolerance, interval, regressed)
