"""The correction engine: IS weights, rejection masks and the metrics verl logs (docs/correction.md).

Pure functions of one :class:`~rcdiag.metrics.ragged.RaggedBatch`. :class:`TokenView` caches what all
configurations share (ℓ, its clamp, row sums), so comparing many presets costs one pass each over the
tokens, not one read of the dump each. Metrics are built from per-row sufficient statistics
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
from collections.abc import Callable, Hashable
from dataclasses import dataclass
from functools import cached_property
from typing import Any, ClassVar, TypeVar

import numpy as np

from rcdiag.correction.config import CorrectionPlan, Criterion, ISPlan, LegacyRejection
from rcdiag.metrics.grouped import Kind, Moments
from rcdiag.metrics.offpolicy import SAFETY_BOUND, count_divisor, masked_log_ratio
from rcdiag.metrics.ragged import (
    F64,
    I64,
    Bool,
    RaggedBatch,
    segment_max,
    segment_min,
    segment_sum,
)

T = TypeVar("T")
RowStats = dict[str, F64 | Moments]
Metrics = dict[str, float | None]


class TokenView:
    """Per-batch token and row arrays shared by every configuration."""

    def __init__(self, batch: RaggedBatch) -> None:
        self.batch = batch
        self.offsets = batch.offsets
        self.mask = batch.mask
        self.log_ratio = masked_log_ratio(batch)
        self._memo: dict[Hashable, Any] = {}

    def memo(self, key: Hashable, compute: Callable[[], T]) -> T:
        """``compute()`` once per batch for ``key``: configurations share weights and criteria."""
        if key not in self._memo:
            self._memo[key] = compute()
        return self._memo[key]

    @cached_property
    def clamped(self) -> F64:
        """clamp(ℓ, ±20), 0 at invalid positions."""
        return np.clip(self.log_ratio, -SAFETY_BOUND, SAFETY_BOUND)

    @cached_property
    def n(self) -> F64:
        if self.batch.all_valid:
            return self.batch.lengths.astype(np.float64)
        return segment_sum(self.mask, self.offsets)

    @cached_property
    def nonempty(self) -> Bool:
        return self.n > 0

    @cached_property
    def seq_sum(self) -> F64:
        """S_i = Σ_valid ℓ (unclamped; 0 for an empty row)."""
        return segment_sum(self.log_ratio, self.offsets)

    @cached_property
    def lengths(self) -> np.ndarray:
        return self.batch.lengths

    def broadcast(self, per_row: np.ndarray) -> np.ndarray:
        """A row value on every position of the row (masked positions included)."""
        return np.repeat(per_row, self.lengths)

    def row_sum(self, token_values: F64) -> F64:
        """Σ over each row's positions, computed once per array and batch (weights and statistics
        are shared by configurations, and several metrics sum the same array)."""
        # the memo keeps the array alive, so its id cannot be reused while the view lives
        key = ("row_sum", id(token_values))
        return self.memo(key, lambda: (token_values, segment_sum(token_values, self.offsets)))[1]

    def valid(self, token_values: F64, fill: float = 0.0) -> F64:
        """The values at valid positions and ``fill`` elsewhere (no copy when all are valid)."""
        return token_values if self.batch.all_valid else np.where(self.mask, token_values, fill)

    def row_mean(self, token_values: F64) -> F64:
        """verl's per-row masked mean Σ_valid x / n_i (0 for an empty row); token_values must be 0
        where invalid."""
        return self.row_sum(token_values) / count_divisor(self.n)

    def token_moments(self, token_values: F64) -> Moments:
        """Per-row count, mean and M2 of the values at valid positions."""
        n = self.n
        sums = (
            self.row_sum(token_values)
            if self.batch.all_valid
            else segment_sum(self.valid(token_values), self.offsets)
        )
        mean = np.divide(sums, n, out=np.zeros_like(n), where=n > 0)
        deviation = self.valid(token_values - self.broadcast(mean))
        np.square(deviation, out=deviation)
        return Moments(n, mean, segment_sum(deviation, self.offsets))

    def row_moments(self, per_row: F64, include: Bool | None = None) -> Moments:
        """Moments of one value per row (rows outside ``include`` left out)."""
        count = np.ones(per_row.size) if include is None else include.astype(np.float64)
        return Moments(count, np.where(count > 0, per_row, 0.0), np.zeros(per_row.size))

    def repeated_row_moments(self, per_row: F64) -> Moments:
        """Moments of a row value repeated on each of the row's valid tokens."""
        return Moments(self.n, np.where(self.nonempty, per_row, 0.0), np.zeros(per_row.size))

    def valid_max(self, token_values: F64) -> F64:
        return segment_max(self.valid(token_values, -np.inf), self.offsets)

    def valid_min(self, token_values: F64) -> F64:
        return segment_min(self.valid(token_values, np.inf), self.offsets)

    def count(self, token_flags: Bool) -> F64:
        """Per-row count of valid positions where the flag holds."""
        if not self.batch.all_valid:
            token_flags = token_flags & self.mask
        if not token_flags.any():
            return np.zeros(self.offsets.size - 1)
        return segment_sum(token_flags, self.offsets)

    @cached_property
    def runs(self) -> tuple[I64, I64]:
        """The runs of consecutive rows of one step: their token offsets and their steps.

        A statistic that is only ever summed (or maximised) per step needs no per-row value; it is
        reduced once per run, usually once per batch (docs/correction.md, "Streaming").
        """
        return self.offsets[self.row_runs], self.batch.steps[self.row_runs[:-1]]

    def run_sum(self, values: F64, weights: F64 | None = None) -> F64:
        """Σ values (· weights) over the tokens of each run."""
        token_offsets, _ = self.runs
        if token_offsets.size == 2:  # one run: a BLAS dot product, no temporary array
            total = values.sum() if weights is None else np.dot(values, weights)
            return np.array([total], dtype=np.float64)
        return segment_sum(values if weights is None else values * weights, token_offsets)

    @cached_property
    def row_runs(self) -> I64:
        """The first row of each run (:attr:`runs`), and the number of rows at the end."""
        steps = self.batch.steps
        return np.append(np.flatnonzero(np.diff(steps, prepend=steps[:1] - 1)), steps.size)

    def run_row_sum(self, per_row: F64) -> F64:
        """Σ of a per-row value over the rows of each run."""
        return np.add.reduceat(per_row, self.row_runs[:-1]) if per_row.size else np.zeros(0)

    def run_row_max(self, per_row: F64) -> F64:
        """The largest per-row value of each run."""
        return np.maximum.reduceat(per_row, self.row_runs[:-1]) if per_row.size else np.zeros(0)

    def row_max(self, token_values: F64) -> F64:
        """Each row's largest value over all its positions (−inf for an empty row), once per
        array and batch."""
        key = ("row_max", id(token_values))
        return self.memo(key, lambda: (token_values, segment_max(token_values, self.offsets)))[1]

    def run_max(self, values: F64, weights: F64 | None = None) -> F64:
        """The largest value (· weights) of each run (−inf for a run without tokens); ``values``
        and ``weights`` ≥ 0."""
        token_offsets, _ = self.runs
        if token_offsets.size == 2 and values.size:
            top = int(np.argmax(values))  # usually kept: then no product is needed
            if weights is None or weights[top] == 1.0:
                return values[top : top + 1].copy()
        return segment_max(values if weights is None else values * weights, token_offsets)

    def squares(self, token_values: F64) -> F64:
        """token_values², computed once per array and batch."""
        key = ("squares", id(token_values))
        return self.memo(key, lambda: (token_values, token_values * token_values))[1]

    @cached_property
    def mask_weights(self) -> F64:
        """The mask as 0.0 / 1.0, for dot products."""
        return self.mask.astype(np.float64)


# ----------------------------------------------------------------------------------------------
# Shared formulas


def pooled_std(n: float, m2: float) -> float:
    """verl's sqrt(max(0, E[x²] − E[x]²)) with E = Σ / V, computed without cancellation.

    E[x²] − E[x]² = M2 / V with M2 = Σ(x − x̄)² (docs/metrics.md, "Masked means"). Returns 0.0 when
    V ≤ 1, as verl does.
    """
    return math.sqrt(max(0.0, m2 / n)) if n > 1 else 0.0


def unbiased_std(n: float, m2: float) -> float:
    """Sample standard deviation with N − 1 (0.0 for a single value, as verl does)."""
    return math.sqrt(max(0.0, m2 / (n - 1))) if n > 1 else 0.0


def divide(numerator: float, denominator: float) -> float:
    """numerator / denominator with torch's conventions for a zero denominator (±inf, NaN)."""
    if denominator == 0:
        return math.copysign(math.inf, numerator) if numerator else math.nan
    return numerator / denominator


def safe_log(x: float) -> float:
    return math.log(x) if x > 0 else -math.inf


Getter = Callable[[str], float]
"""Reads a summed statistic of a component by name (``rows``, ``valid_tokens``, ``nonempty_rows``
are always available)."""


class Component(ABC):
    """One unit of verl's correction (an IS level, one criterion, the veto, …) on a batch.

    Components are frozen and hashable: presets that share one are computed once per batch.
    """

    kinds: ClassVar[dict[str, Kind]]
    run_kinds: ClassVar[dict[str, Kind]] = {}
    """Statistics kept per run of rows of one step (:meth:`TokenView.runs`), not per row."""

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
        stats["high"] = view.count(raw > hi)
        stats["low"] = view.count(raw < lo)
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
        top = math.exp(min(get("max"), SAFETY_BOUND))
        with np.errstate(over="ignore", under="ignore"):  # unclamped: may be 0 or inf, as in verl
            bottom = float(np.exp(get("min")))
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


# ----------------------------------------------------------------------------------------------
# Importance sampling (docs/correction.md)


@dataclass(frozen=True)
class Weights:
    """Token arrays of one IS configuration on one batch (0 at invalid positions)."""

    raw: F64
    applied: F64
    row_log_ratio: F64 | None  # S_i at sequence level


def raw_weights(view: TokenView, level: str) -> F64:
    """R of every valid token (0 elsewhere): exp(clamp ℓ) at token level, exp(clamp S_i) broadcast
    over the row at sequence level; shared by every configuration of that level."""
    if level == "token":
        return view.valid(np.exp(view.clamped))
    row_weight = np.exp(np.clip(view.seq_sum, -SAFETY_BOUND, SAFETY_BOUND))
    return view.valid(view.broadcast(row_weight))


@dataclass(frozen=True)
class Importance(Component):
    """IS weights of one level and band; metrics from W (latest) or R (legacy)."""

    plan: ISPlan
    dialect: str

    kinds: ClassVar[dict[str, Kind]] = {
        **WEIGHT_KINDS,
        "oob": "sum",
        "applied_sum": "sum",
        "applied_row_mean": "sum",
        "applied_sq": "sum",
    }

    def weights(self, view: TokenView) -> Weights:
        """R and W before batch normalisation (docs/correction.md, 'Importance sampling', steps 1–2)."""
        return view.memo(self.weights_key, lambda: self._weights(view))

    @property
    def weights_key(self) -> tuple[Any, ...]:
        """What the weights depend on (not the dialect nor batch normalisation)."""
        return ("weights", self.plan.level, self.plan.lo, self.plan.hi, self.plan.icepop)

    def _weights(self, view: TokenView) -> Weights:
        plan = self.plan
        row = None if plan.level == "token" else view.seq_sum
        raw = view.memo(("raw_weights", plan.level), lambda: raw_weights(view, plan.level))
        if plan.icepop:
            applied = np.where((raw >= plan.lo) & (raw <= plan.hi), raw, 0.0)
        else:
            applied = np.minimum(raw, plan.hi)
        return Weights(raw, applied, row)

    def row_stats(self, view: TokenView) -> RowStats:
        plan, w = self.plan, self.weights(view)
        legacy = self.dialect == "legacy"
        measured = w.raw if legacy else w.applied
        # latest: W already lies in [0, hi] (0 at invalid positions), so clip(W, 0, hi) is W
        band = view.valid(np.clip(w.raw, plan.lo, plan.hi)) if legacy else w.applied
        stats = weight_row_stats(view, w.raw, measured, band, w.row_log_ratio, plan.lo, plan.hi)
        stats["oob"] = view.count((w.raw < plan.lo) | (w.raw > plan.hi))
        stats["applied_sum"] = view.row_sum(w.applied)
        stats["applied_row_mean"] = view.row_mean(w.applied)
        stats["applied_sq"] = view.row_sum(view.squares(w.applied))
        return stats

    def batch_norm_factor(self, get: Getter) -> float:
        """The batch-normalisation μ (docs/correction.md), or 1.0 when μ ≤ 1e-8 (weights unchanged)."""
        if self.plan.level == "token":
            mu = get("applied_sum") / get("valid_tokens")
        else:  # the legacy dialect (PR #4070) averaged over all rows, later over non-empty ones
            rows = get("rows") if self.dialect == "legacy" else get("nonempty_rows")
            mu = get("applied_row_mean") / rows if rows else 0.0
        return mu if mu > 1e-8 else 1.0

    def metrics(self, get: Getter) -> Metrics:
        prefix = "rollout_corr/rollout_is_"
        metrics = weight_metrics(get, prefix, self.plan.level == "token")
        if self.plan.icepop:
            metrics[f"{prefix}oob_ratio"] = get("oob") / get("valid_tokens")
        if self.plan.batch_normalize:
            metrics[f"{prefix}batch_norm_factor"] = self.batch_norm_factor(get)
        return metrics


@dataclass(frozen=True)
class BatchNormalisation(Component):
    """Only what an IS configuration's batch-normalisation μ reads (a sweep point's summary needs
    μ, not the IS metrics)."""

    plan: ISPlan
    dialect: str

    kinds: ClassVar[dict[str, Kind]] = {"applied_sum": "sum", "applied_row_mean": "sum"}

    def row_stats(self, view: TokenView) -> RowStats:
        applied = Importance(self.plan, self.dialect).weights(view).applied
        return {"applied_sum": view.row_sum(applied), "applied_row_mean": view.row_mean(applied)}

    def metrics(self, get: Getter) -> Metrics:
        return {}


# ----------------------------------------------------------------------------------------------
# Rejection, latest dialect (docs/correction.md)


def divergence(view: TokenView, name: str) -> F64:
    """Per-token k1 = −ℓ̃, k2 = ½ℓ̃², k3 = exp(ℓ̃) − 1 − ℓ̃ on ℓ̃ = clamp(ℓ); 0 at invalid positions."""
    ell = view.clamped
    formulas: dict[str, Callable[[], F64]] = {
        "k1": lambda: -ell,
        "k2": lambda: 0.5 * ell * ell,
        "k3": lambda: np.expm1(ell) - ell,
    }
    return view.memo(("divergence", name), formulas[name])


@dataclass(frozen=True)
class Judged:
    """What one rejection rule decided on a batch."""

    keep: Bool  # per position; False only at valid positions it rejects
    token_statistic: F64 | None = None
    row_statistic: F64 | None = None
    row_keep: Bool | None = None


@dataclass(frozen=True)
class Rejection(Component):
    """One latest-dialect criterion: keep when log lo ≤ stat ≤ log hi (k1) or stat ≤ hi (k2/k3)."""

    criterion: Criterion

    kinds: ClassVar[dict[str, Kind]] = {
        **{name: kind for name, kind in WEIGHT_KINDS.items() if name != "band_sq"},
        "rejected": "sum",
        "rejected_rows": "sum",
    }

    @property
    def bounds(self) -> tuple[float, float]:
        """(L, U) in the statistic's space: log bounds for k1, (0, hi) for k2/k3."""
        c = self.criterion
        if c.divergence == "k1":
            return safe_log(c.lo), safe_log(c.hi)  # C = inf: 1/C = 0, no lower bound
        return 0.0, c.hi

    def judge(self, view: TokenView) -> Judged:
        return view.memo(("criterion", self.criterion), lambda: self._judge(view))

    def _judge(self, view: TokenView) -> Judged:
        k = divergence(view, self.criterion.divergence)
        aggregation = self.criterion.aggregation
        lower, upper = self.bounds
        two_sided = self.criterion.divergence == "k1"

        def accepted(statistic: F64) -> Bool:
            below = statistic <= upper
            return (statistic >= lower) & below if two_sided else below

        if aggregation == "token":
            return Judged(accepted(k) | ~view.mask, token_statistic=k)
        if aggregation == "sum":
            row = segment_sum(k, view.offsets)
        elif aggregation == "mean":
            row = view.row_mean(k)
        else:
            row = np.where(view.nonempty, view.valid_max(k), 0.0)
        row_keep = accepted(row)
        return Judged(view.broadcast(row_keep) | ~view.mask, row_statistic=row, row_keep=row_keep)

    def row_stats(self, view: TokenView) -> RowStats:
        judged = self.judge(view)
        lower, upper = self.bounds
        nonempty = view.nonempty
        if judged.token_statistic is not None:
            token = judged.token_statistic
            values = view.row_mean(token)
            stats: RowStats = {
                "sum": segment_sum(token, view.offsets),
                "max": view.valid_max(token),
                "min": view.valid_min(token),
                "high": view.count(token > upper),
                "low": view.count(token < lower),
                "band": view.token_moments(np.clip(token, lower, upper)),
            }
        else:
            row = judged.row_statistic
            assert row is not None
            values = row
            stats = {
                "sum": row * view.n,
                "max": np.where(nonempty, row, -np.inf),
                "min": np.where(nonempty, row, np.inf),
                "high": ((row > upper) & nonempty).astype(np.float64),
                "low": ((row < lower) & nonempty).astype(np.float64),
                "band": view.repeated_row_moments(np.clip(row, lower, upper)),
            }
        rejected = view.count(~judged.keep)
        stats.update(
            {
                "seq": view.row_moments(values, nonempty),
                "seq_max": np.where(nonempty, values, -np.inf),
                "seq_min": np.where(nonempty, values, np.inf),
                "seq_dev": np.where(nonempty, np.abs(values), -np.inf),
                "seq_high": ((values > upper) & nonempty).astype(np.float64),
                "seq_low": ((values < lower) & nonempty).astype(np.float64),
                "rejected": rejected,
                "rejected_rows": (rejected > 0).astype(np.float64),
            }
        )
        return stats

    def metrics(self, get: Getter) -> Metrics:
        pooled = get("valid_tokens")
        nonempty = get("nonempty_rows")
        is_k1 = self.criterion.divergence == "k1"
        per = pooled if self.criterion.aggregation == "token" else nonempty
        p = f"rollout_corr/rollout_rs_{self.criterion.option}_"
        metrics: Metrics = {
            f"{p}mean": get("sum") / pooled,
            f"{p}max": get("max"),
            f"{p}min": get("min"),
            f"{p}fraction_high": get("high") / per,
            f"{p}fraction_low": get("low") / per if is_k1 else 0.0,
            f"{p}std": pooled_std(get("band.n"), get("band.m2")),
            f"{p}seq_mean": get("seq.mean"),
            f"{p}seq_std": unbiased_std(get("seq.n"), get("seq.m2")),
            f"{p}seq_max": get("seq_max"),
            f"{p}seq_min": get("seq_min"),
            f"{p}seq_max_deviation": get("seq_dev"),
            f"{p}seq_fraction_high": get("seq_high") / nonempty,
        }
        if is_k1:
            metrics[f"{p}seq_fraction_low"] = get("seq_low") / nonempty
        metrics[f"{p}masked_fraction"] = get("rejected") / pooled
        metrics[f"{p}seq_masked_fraction"] = get("rejected_rows") / nonempty
        return metrics


# ----------------------------------------------------------------------------------------------
# Rejection and veto, legacy dialect (docs/correction.md)


@dataclass(frozen=True)
class LegacyRejectionRule(Component):
    """SEED-era RS on ρ itself: keep when lower ≤ ratio ≤ upper; metrics follow the IS formulas."""

    rule: LegacyRejection

    kinds: ClassVar[dict[str, Kind]] = {
        **WEIGHT_KINDS,
        "rejected": "sum",
        "rejected_rows": "sum",
        "rejected_row_flags": "sum",
    }

    def ratio(self, view: TokenView) -> tuple[F64, F64 | None]:
        """Token ratio (0 where invalid) and, for sequence/geometric, the per-row log-ratio."""
        level = self.rule.level
        if level == "token":
            return view.memo(("raw_weights", "token"), lambda: raw_weights(view, "token")), None
        row = view.seq_sum if level == "sequence" else view.row_mean(view.log_ratio)
        ratio = view.broadcast(np.exp(np.clip(row, -SAFETY_BOUND, SAFETY_BOUND)))
        return np.where(view.mask, ratio, 0.0), row

    def judge(self, view: TokenView) -> Judged:
        return view.memo(("legacy_rs", self.rule), lambda: self._judge(view))

    def _judge(self, view: TokenView) -> Judged:
        lower, upper = self.rule.lower, self.rule.upper
        token_ratio, row = self.ratio(view)
        if row is None:
            keep = ((token_ratio >= lower) & (token_ratio <= upper)) | ~view.mask
            return Judged(keep, token_statistic=token_ratio)
        row_ratio = np.exp(np.clip(row, -SAFETY_BOUND, SAFETY_BOUND))
        row_keep = (row_ratio >= lower) & (row_ratio <= upper)
        return Judged(view.broadcast(row_keep) | ~view.mask, row_statistic=row, row_keep=row_keep)

    def row_stats(self, view: TokenView) -> RowStats:
        lower, upper = self.rule.lower, self.rule.upper
        ratio, row = self.ratio(view)
        band = np.where(view.mask, np.clip(ratio, lower, upper), 0.0)
        stats = weight_row_stats(view, ratio, ratio, band, row, lower, upper)
        judged = self.judge(view)
        rejected = view.count(~judged.keep)
        stats["rejected"] = rejected
        stats["rejected_rows"] = (rejected > 0).astype(np.float64)
        # sequence/geometric: verl averages (1 − keep flag) over rows, empty rows included
        flags = judged.row_keep
        stats["rejected_row_flags"] = (
            stats["rejected_rows"] if flags is None else (~flags).astype(np.float64)
        )
        return stats

    def metrics(self, get: Getter) -> Metrics:
        prefix = "rollout_corr/rollout_rs_"
        metrics = weight_metrics(get, prefix, self.rule.level == "token")
        metrics[f"{prefix}masked_fraction"] = get("rejected") / get("valid_tokens")
        metrics[f"{prefix}seq_masked_fraction"] = get("rejected_row_flags") / get("rows")
        return metrics


@dataclass(frozen=True)
class Veto(Component):
    """The legacy token veto: a row holding a valid token with ℓ < log τ is rejected whole."""

    threshold: float | None

    kinds: ClassVar[dict[str, Kind]] = {"catastrophic": "sum", "vetoed_rows": "sum"}

    def catastrophic(self, view: TokenView) -> F64:
        if self.threshold is None:
            return np.zeros(view.batch.rows)
        return view.count(view.log_ratio < math.log(self.threshold))

    def keep(self, view: TokenView) -> Bool:
        return view.broadcast(self.catastrophic(view) == 0) | ~view.mask

    def row_stats(self, view: TokenView) -> RowStats:
        catastrophic = self.catastrophic(view)
        return {"catastrophic": catastrophic, "vetoed_rows": (catastrophic > 0).astype(np.float64)}

    def metrics(self, get: Getter) -> Metrics:
        return {
            "rollout_corr/rollout_is_veto_fraction": get("vetoed_rows") / get("rows"),
            "rollout_corr/rollout_is_catastrophic_token_fraction": get("catastrophic")
            / get("valid_tokens"),
        }


# ----------------------------------------------------------------------------------------------
# A whole configuration


def plan_components(plan: CorrectionPlan) -> tuple[Component, ...]:
    """The components whose metrics verl logs for ``plan``, in verl's order."""
    parts: list[Component] = []
    if plan.importance is not None:
        parts.append(Importance(plan.importance, plan.dialect))
    parts.extend(Rejection(c) for c in plan.criteria)
    if plan.legacy_rejection is not None:
        parts.append(LegacyRejectionRule(plan.legacy_rejection))
    if plan.dialect == "legacy":
        parts.append(Veto(plan.veto_threshold))
    return tuple(parts)


def _rejection_key(plan: CorrectionPlan) -> tuple[Any, ...]:
    return (plan.criteria, plan.legacy_rejection, plan.veto_threshold)


def rejects(plan: CorrectionPlan) -> bool:
    """Whether the configuration can reject tokens at all."""
    return (
        bool(plan.criteria) or plan.legacy_rejection is not None or plan.veto_threshold is not None
    )


def plan_row_keep(view: TokenView, plan: CorrectionPlan) -> Bool | None:
    """Which rows the configuration keeps whole, when every rule of it judges whole rows
    (sequence-level criteria, legacy sequence/geometric RS, the veto); None when one judges tokens.
    """

    def combine() -> Bool | None:
        rules: list[Judged] = [Rejection(c).judge(view) for c in plan.criteria]
        if plan.legacy_rejection is not None:
            rules.append(LegacyRejectionRule(plan.legacy_rejection).judge(view))
        keep = np.ones(view.offsets.size - 1, dtype=bool)
        for judged in rules:
            if judged.row_keep is None:
                return None
            keep &= judged.row_keep
        if plan.veto_threshold is not None:
            keep &= Veto(plan.veto_threshold).catastrophic(view) == 0
        return keep

    return view.memo(("row_keep", _rejection_key(plan)), combine)


def plan_keep(view: TokenView, plan: CorrectionPlan) -> Bool:
    """The combined keep mask: every criterion (and, legacy, RS × veto) must keep a position."""

    def combine() -> Bool:
        keep = np.ones(view.mask.size, dtype=bool)
        for criterion in plan.criteria:
            keep &= Rejection(criterion).judge(view).keep
        if plan.legacy_rejection is not None:
            keep &= LegacyRejectionRule(plan.legacy_rejection).judge(view).keep
        if plan.veto_threshold is not None:
            keep &= Veto(plan.veto_threshold).keep(view)
        return keep

    return view.memo(("keep", _rejection_key(plan)), combine)


@dataclass(frozen=True)
class Outcome(Component):
    """What a whole configuration does: combined rejection and the weights that survive it.

    Feeds verl's overall ``rollout_rs_masked_fraction`` (latest dialect) and rcdiag's summary.
    Configurations sharing their rejection rules, or their weights, share those per-batch passes.
    """

    plan: CorrectionPlan

    kinds: ClassVar[dict[str, Kind]] = {
        "rejected": "sum",
        "rejected_rows": "sum",
        "fully_rejected_rows": "sum",
        "kept": "sum",
    }
    run_kinds: ClassVar[dict[str, Kind]] = {
        "kept_raw": "sum",
        "kept_applied": "sum",
        "kept_applied_sq": "sum",
        "kept_applied_max": "max",
    }

    def _kept_weights(self, view: TokenView) -> F64 | None:
        """1.0 at the valid positions the configuration keeps, 0.0 elsewhere; None when it cannot
        reject (every valid position is kept)."""
        if not rejects(self.plan):
            return None

        def weights() -> F64:
            keep = plan_keep(view, self.plan)
            return (keep if view.batch.all_valid else keep & view.mask).astype(np.float64)

        return view.memo(("kept_weights", _rejection_key(self.plan)), weights)

    def row_stats(self, view: TokenView) -> RowStats:
        row_keep = plan_row_keep(view, self.plan) if rejects(self.plan) else None
        if row_keep is not None:  # whole rows kept or rejected: no pass over the tokens
            kept = np.where(row_keep, view.n, 0.0)
        else:
            keep = self._kept_weights(view)
            kept = view.n if keep is None else view.row_sum(keep)
        rejected = view.n - kept
        return {
            "rejected": rejected,
            "rejected_rows": (rejected > 0).astype(np.float64),
            "fully_rejected_rows": ((rejected == view.n) & view.nonempty).astype(np.float64),
            "kept": kept,
        }

    def run_stats(self, view: TokenView) -> dict[str, F64]:
        plan = self.plan
        row_keep = plan_row_keep(view, plan) if rejects(plan) else None
        if row_keep is not None:
            return self._row_kept_sums(view, row_keep)
        keep = self._kept_weights(view)
        if plan.importance is None:  # every kept token has weight 1
            kept = view.run_sum(view.mask_weights if keep is None else keep)
            ones = np.where(kept > 0, 1.0, -np.inf)
            return {
                "kept_raw": kept,
                "kept_applied": kept,
                "kept_applied_sq": kept,
                "kept_applied_max": ones,
            }
        importance = Importance(plan.importance, plan.dialect)
        weights, weights_key = importance.weights(view), importance.weights_key

        def kept_sums() -> dict[str, F64]:
            # Weights are ≥ 0 and already 0 at invalid positions, so weighting by the keep mask
            # drops the rejected ones; a run without kept weight then has maximum 0, which never
            # decides a step's maximum (a step without any kept token has no max_weight).
            applied = weights.applied
            squares = view.squares(applied)
            return {
                "kept_raw": view.run_sum(weights.raw, keep),
                "kept_applied": view.run_sum(applied, keep),
                "kept_applied_sq": view.run_sum(squares, keep),
                "kept_applied_max": view.run_max(applied, keep),
            }

        rejection = _rejection_key(plan) if keep is not None else None
        return view.memo(("kept_sums", weights_key, rejection), kept_sums)

    def _row_kept_sums(self, view: TokenView, row_keep: Bool) -> dict[str, F64]:
        """The kept sums when whole rows are kept or rejected: per-row sums of the weights
        (shared by every configuration with those weights) restricted to the kept rows."""
        kept_rows = row_keep.astype(np.float64)
        kept = view.run_row_sum(view.n * kept_rows)
        if self.plan.importance is None:
            ones = np.where(kept > 0, 1.0, -np.inf)
            return {
                "kept_raw": kept,
                "kept_applied": kept,
                "kept_applied_sq": kept,
                "kept_applied_max": ones,
            }
        weights = Importance(self.plan.importance, self.plan.dialect).weights(view)
        applied = weights.applied
        return {
            "kept_raw": view.run_row_sum(view.row_sum(weights.raw) * kept_rows),
            "kept_applied": view.run_row_sum(view.row_sum(applied) * kept_rows),
            "kept_applied_sq": view.run_row_sum(view.row_sum(view.squares(applied)) * kept_rows),
            # a rejected row keeps no weight: maximum 0, as on the token path
            "kept_applied_max": view.run_row_max(np.where(row_keep, view.row_max(applied), 0.0)),
        }

    def metrics(self, get: Getter) -> Metrics:
        if not self.plan.criteria:
            return {}
        return {
            "rollout_corr/rollout_rs_masked_fraction": get("rejected") / get("valid_tokens"),
            "rollout_corr/rollout_rs_seq_masked_fraction": get("rejected_rows") / get("rows"),
        }


def apply_correction(batch: RaggedBatch, plan: CorrectionPlan) -> tuple[F64 | None, Bool]:
    """What verl's helper returns for ``batch`` taken as one verl batch.

    Returns:
        The IS weights after batch normalisation (0 at invalid positions), or None without IS; and
        the new response mask (original mask × every keep mask).
    """
    view = TokenView(batch)
    mask = plan_keep(view, plan) & view.mask
    if plan.importance is None:
        return None, mask
    importance = Importance(plan.importance, plan.dialect)
    weights = importance.weights(view).applied
    if plan.importance.batch_normalize:
        stats = importance.row_stats(view)
        base = {
            "rows": float(batch.rows),
            "valid_tokens": float(view.n.sum()),
            "nonempty_rows": float(view.nonempty.sum()),
        }

        def get(name: str) -> float:
            if name in base:
                return base[name]
            value = stats[name]
            assert not isinstance(value, Moments)
            return float(value.sum())

        weights = weights / importance.batch_norm_factor(get)
    return weights, mask
