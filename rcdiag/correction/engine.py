"""The correction engine: IS weights, rejection masks and the metrics verl logs (docs/correction.md).

Pure functions of one :class:`~rcdiag.metrics.ragged.RaggedBatch`, seen through its
:class:`~rcdiag.correction.view.TokenView`. This module holds what every part shares: the
:class:`Component` interface and the weight statistics; the parts are in
:mod:`~rcdiag.correction.importance`, :mod:`~rcdiag.correction.rejection` and
:mod:`~rcdiag.correction.outcome`. Metrics are built from per-row sufficient statistics
(sums, maxima, minima, moments) so that they stream: a step is the union of its rows, and the
overall value is the whole dump as one batch.

Notation as in :mod:`rcdiag.metrics.offpolicy`; further, R is the raw weight (exp of the clamped
token ℓ or row sum S_i), W the applied weight (TIS: min(R, hi); IcePop: R inside [lo, hi], else 0),
V valid tokens, B rows, N⁺ rows with at least one valid token. verl's masked means divide by
Σm + 1e-8, which for its integer masks is exactly the count (:func:`~rcdiag.metrics.offpolicy.count_divisor`):
a pooled mean divides by V, a row's by n_i.
"""

from __future__ import annotations

import math
from abc import ABC, abstractmethod
from collections.abc import Callable
from typing import Any, ClassVar

import numpy as np

from rcdiag.correction.view import TokenView
from rcdiag.metrics.grouped import Kind, Moments
from rcdiag.metrics.ragged import (
    F64,
)
from rcdiag.metrics.token_sums import SAFETY_BOUND

RowStats = dict[str, F64 | Moments]
Metrics = dict[str, float | None]


# ----------------------------------------------------------------------------------------------
# Shared formulas


def _number(value: Any) -> Any:
    """A 0-d array as a Python float; an array over steps as it is."""
    return float(value) if np.ndim(value) == 0 else value


def pooled_std(n: Any, m2: Any) -> Any:
    """verl's sqrt(max(0, E[x²] − E[x]²)) with E = Σ / V, computed without cancellation.

    E[x²] − E[x]² = M2 / V with M2 = Σ(x − x̄)² (docs/metrics.md, "Masked means"). Returns 0.0 when
    V ≤ 1, as verl does. ``n`` and ``m2``: floats, or arrays of one value per step.
    """
    with np.errstate(all="ignore"):
        return _number(np.where(np.greater(n, 1), np.sqrt(np.fmax(0.0, np.divide(m2, n))), 0.0))


def unbiased_std(n: Any, m2: Any) -> Any:
    """Sample standard deviation with N − 1 (0.0 for a single value, as verl does)."""
    with np.errstate(all="ignore"):
        spread = np.sqrt(np.fmax(0.0, np.divide(m2, np.subtract(n, 1))))
        return _number(np.where(np.greater(n, 1), spread, 0.0))


def divide(numerator: Any, denominator: Any) -> Any:
    """numerator / denominator with torch's conventions for a zero denominator (±inf, NaN)."""
    with np.errstate(all="ignore"):
        by_zero = np.where(np.not_equal(numerator, 0), np.copysign(np.inf, numerator), np.nan)
        return _number(
            np.where(np.equal(denominator, 0), by_zero, np.divide(numerator, denominator))
        )


def safe_log(x: float) -> float:
    return math.log(x) if x > 0 else -math.inf


Getter = Callable[[str], Any]
"""Reads a summed statistic of a component by name (``rows``, ``valid_tokens``, ``nonempty_rows``
are always available): a float, or for a component whose :attr:`Component.vectorised` is set, an
array of the statistic at every step."""


class Component(ABC):
    """One unit of verl's correction (an IS level, one criterion, the veto, …) on a batch.

    Components are frozen and hashable: presets that share one are computed once per batch.
    """

    kinds: ClassVar[dict[str, Kind]]
    run_kinds: ClassVar[dict[str, Kind]] = {}
    """Statistics kept per run of rows of one step (:meth:`TokenView.runs`), not per row."""
    vectorised: ClassVar[bool] = False
    """Whether :meth:`metrics` also takes statistics as arrays (one value per step), so that the
    metrics of every step are computed in one call; else it is called once per step."""

    @abstractmethod
    def row_stats(self, view: TokenView) -> RowStats:
        """Per-row sufficient statistics, keyed as in :attr:`kinds`."""

    def run_stats(self, view: TokenView) -> dict[str, F64]:
        """Per-run statistics, keyed as in :attr:`run_kinds`."""
        return {}

    @abstractmethod
    def metrics(self, get: Getter) -> Metrics:
        """verl's logged metrics from the summed statistics of a batch."""


# ----------------------------------------------------------------------------------------------
# Weight statistics (IS metrics, and the legacy RS metrics, which reuse the IS formulas)


WEIGHT_KINDS: dict[str, Kind] = {
    "sum": "sum",
    "max": "max",
    "min": "min",
    "high": "sum",
    "low": "sum",
    "band": "moments",
    "band_sq": "sum",
    "seq": "moments",
    "seq_max": "max",
    "seq_min": "min",
    "seq_dev": "max",
    "seq_high": "sum",
    "seq_low": "sum",
}


def weight_row_stats(
    view: TokenView,
    raw: F64,
    measured: F64,
    band: F64,
    row_log_ratio: F64 | None,
    lo: float,
    hi: float,
) -> RowStats:
    """The IS-metric statistics (docs/correction.md) of token weights ``measured`` (W or R), raw R.

    ``band`` is the clamped weight x used by std and ESS; ``row_log_ratio`` the per-row log weight
    for sequence-level max/min/fractions (None at token level). All token arrays are 0 where invalid.
    """
    s = view.row_mean(measured)
    r = view.row_mean(raw)
    stats: RowStats = {
        "sum": view.row_sum(measured),
        "band": view.token_moments(band),
        "band_sq": view.row_sum(view.squares(band)),
        "seq": view.row_moments(s),
        "seq_max": s,
        "seq_min": s,
        "seq_dev": np.abs(s - 1.0),
        "seq_high": (r > hi).astype(np.float64),
        "seq_low": (r < lo).astype(np.float64),
    }
    if row_log_ratio is None:
        stats["max"] = view.valid_max(measured)
        stats["min"] = view.valid_min(measured)
        stats["high"] = view.count_above(raw, hi)
        stats["low"] = view.count_below(raw, lo)
    else:
        stats["max"] = row_log_ratio
        stats["min"] = row_log_ratio
        stats["high"] = (row_log_ratio > safe_log(hi)).astype(np.float64)
        stats["low"] = (row_log_ratio < safe_log(lo)).astype(np.float64)
    return stats


def weight_metrics(get: Getter, prefix: str, token_level: bool) -> Metrics:
    """The 14 weight metrics under ``prefix`` (e.g. ``rollout_corr/rollout_is_``), docs/correction.md."""
    rows = get("rows")
    pooled = get("valid_tokens")
    band_n, band_mean = get("band.n"), get("band.mean")
    band_bar = band_n * band_mean / pooled
    if token_level:
        high, low = get("high") / pooled, get("low") / pooled
        top, bottom = get("max"), get("min")
    else:
        high, low = get("high") / rows, get("low") / rows
        with np.errstate(over="ignore", under="ignore"):  # unclamped: may be 0 or inf, as in verl
            top = _number(np.exp(np.minimum(get("max"), SAFETY_BOUND)))
            bottom = _number(np.exp(get("min")))
    return {
        f"{prefix}mean": get("sum") / pooled,
        f"{prefix}max": top,
        f"{prefix}min": bottom,
        f"{prefix}ratio_fraction_high": high,
        f"{prefix}ratio_fraction_low": low,
        f"{prefix}std": pooled_std(band_n, get("band.m2")),
        # verl: 1 / pooled mean of (x / (x̄ + 1e-8))², the 1e-8 added in float64
        f"{prefix}eff_sample_size": divide(pooled * (band_bar + 1e-8) ** 2, get("band_sq")),
        f"{prefix}seq_mean": get("seq.mean"),
        f"{prefix}seq_std": unbiased_std(get("seq.n"), get("seq.m2")),
        f"{prefix}seq_max": get("seq_max"),
        f"{prefix}seq_min": get("seq_min"),
        f"{prefix}seq_max_deviation": get("seq_dev"),
        f"{prefix}seq_fraction_high": get("seq_high") / rows,
        f"{prefix}seq_fraction_low": get("seq_low") / rows,
    }
