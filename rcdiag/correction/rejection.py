"""Rejection: the latest dialect's criteria, the legacy ratio rules and the veto
(docs/correction.md)."""

from __future__ import annotations

import math
from collections.abc import Callable
from dataclasses import dataclass
from functools import cached_property
from typing import ClassVar

import numpy as np

from rcdiag.correction.config import Criterion, LegacyRejection
from rcdiag.correction.engine import (
    WEIGHT_KINDS,
    Component,
    Getter,
    Metrics,
    RowStats,
    pooled_std,
    safe_log,
    unbiased_std,
    weight_metrics,
    weight_row_stats,
)
from rcdiag.correction.importance import raw_weights
from rcdiag.correction.view import TokenView
from rcdiag.metrics.grouped import Kind
from rcdiag.metrics.offpolicy import count_divisor
from rcdiag.metrics.ragged import (
    F64,
    I64,
    Bool,
    segment_sum,
)
from rcdiag.metrics.token_sums import SAFETY_BOUND

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


def divergence_row_sum(view: TokenView, name: str) -> F64:
    """Σ_valid of :func:`divergence` per row: for k1 and k2 from the row sums of ℓ̃ and ℓ̃² (the
    same numbers: negating and halving are exact), for k3 the analysis's Σ(e^ℓ − 1 − ℓ) when
    nothing was clamped, else from its token array."""
    ell = view.clamped
    if name == "k1":
        return -view.row_sum(ell)
    if name == "k2":
        return 0.5 * view.row_sum(view.squares(ell))
    if ell is view.log_ratio and "k3" in view.row_sums:
        return view.row_sums["k3"]
    return view.row_sum(divergence(view, name))


def divergence_row_max(view: TokenView, name: str) -> F64:
    """max_valid of :func:`divergence` per row (−inf for a row without valid tokens). For k2 when
    nothing was clamped, ½·m·m of the analysis's largest |ℓ| per row m, without a token array:
    x ↦ (½x)·x rounds the same for ±x and never decreases as |x| grows, so the largest ½ℓ² is
    that of the largest |ℓ| (the very same number)."""
    ell = view.clamped
    if name == "k2" and ell is view.log_ratio and "abs_log_ratio_max" in view.row_sums:
        largest = view.row_sums["abs_log_ratio_max"]
        return np.where(view.nonempty, 0.5 * largest * largest, -np.inf)
    return view.valid_max(divergence(view, name))


@dataclass(frozen=True)
class Judged:
    """What one rejection rule decided on a batch: per position (token rules), or per row (row
    rules, whose per-position mask is built only when something asks for it: a configuration
    whose rules all judge rows never does)."""

    token_keep: Bool | None = None
    token_statistic: F64 | None = None
    row_statistic: F64 | None = None
    row_keep: Bool | None = None
    lengths: I64 | None = None  # of the rows, with ``mask``: to spread a row decision
    mask: Bool | None = None

    @cached_property
    def keep(self) -> Bool:
        """Per position; False only at valid positions the rule rejects."""
        if self.token_keep is not None:
            return self.token_keep
        assert self.row_keep is not None and self.lengths is not None and self.mask is not None
        return np.repeat(self.row_keep, self.lengths) | ~self.mask

    def rejected(self, view: TokenView) -> F64:
        """Per-row count of the valid tokens the rule rejects (all of a rejected row's)."""
        if self.row_keep is not None:
            return np.where(self.row_keep, 0.0, view.n)
        return view.count(~self.keep)


@dataclass(frozen=True)
class Rejection(Component):
    """One latest-dialect criterion: keep when log lo ≤ stat ≤ log hi (k1) or stat ≤ hi (k2/k3)."""

    criterion: Criterion

    vectorised: ClassVar[bool] = True  # metrics() reads arrays of steps too
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
        name, aggregation = self.criterion.divergence, self.criterion.aggregation
        lower, upper = self.bounds
        two_sided = self.criterion.divergence == "k1"

        def accepted(statistic: F64) -> Bool:
            below = statistic <= upper
            return (statistic >= lower) & below if two_sided else below

        if aggregation == "token":
            k = divergence(view, name)
            return Judged(token_keep=view.or_invalid(accepted(k)), token_statistic=k)
        if aggregation == "sum":  # row sums only: no token array for k1 and k2
            row = divergence_row_sum(view, name)
        elif aggregation == "mean":
            row = divergence_row_sum(view, name) / count_divisor(view.n)
        else:
            row = np.where(view.nonempty, divergence_row_max(view, name), 0.0)
        return Judged(
            row_statistic=row, row_keep=accepted(row), lengths=view.lengths, mask=view.mask
        )

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
                "high": view.count_above(token, upper),
                "low": view.count_below(token, lower),
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
        rejected = judged.rejected(view)
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

    vectorised: ClassVar[bool] = True  # metrics() reads arrays of steps too
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
            keep = view.or_invalid((token_ratio >= lower) & (token_ratio <= upper))
            return Judged(token_keep=keep, token_statistic=token_ratio)
        row_ratio = np.exp(np.clip(row, -SAFETY_BOUND, SAFETY_BOUND))
        row_keep = (row_ratio >= lower) & (row_ratio <= upper)
        return Judged(row_statistic=row, row_keep=row_keep, lengths=view.lengths, mask=view.mask)

    def row_stats(self, view: TokenView) -> RowStats:
        lower, upper = self.rule.lower, self.rule.upper
        ratio, row = self.ratio(view)
        band = np.where(view.mask, np.clip(ratio, lower, upper), 0.0)
        stats = weight_row_stats(view, ratio, ratio, band, row, lower, upper)
        judged = self.judge(view)
        rejected = judged.rejected(view)
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

    vectorised: ClassVar[bool] = True  # metrics() reads arrays of steps too
    kinds: ClassVar[dict[str, Kind]] = {"catastrophic": "sum", "vetoed_rows": "sum"}

    def catastrophic(self, view: TokenView) -> F64:
        if self.threshold is None:
            return np.zeros(view.batch.rows)
        return view.count_below(view.log_ratio, math.log(self.threshold))

    def keep(self, view: TokenView) -> Bool:
        return view.or_invalid(view.broadcast(self.catastrophic(view) == 0))

    def row_stats(self, view: TokenView) -> RowStats:
        catastrophic = self.catastrophic(view)
        return {"catastrophic": catastrophic, "vetoed_rows": (catastrophic > 0).astype(np.float64)}

    def metrics(self, get: Getter) -> Metrics:
        return {
            "rollout_corr/rollout_is_veto_fraction": get("vetoed_rows") / get("rows"),
            "rollout_corr/rollout_is_catastrophic_token_fraction": get("catastrophic")
            / get("valid_tokens"),
        }
