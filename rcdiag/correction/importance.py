"""Importance sampling: raw and applied weights, their metrics and batch normalisation
(docs/correction.md)."""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any, ClassVar

import numpy as np

from rcdiag.correction.config import ISPlan
from rcdiag.correction.engine import (
    WEIGHT_KINDS,
    Component,
    Getter,
    Metrics,
    RowStats,
    safe_log,
    weight_metrics,
    weight_row_stats,
)
from rcdiag.correction.view import TokenView
from rcdiag.metrics.grouped import Kind, Moments
from rcdiag.metrics.ragged import (
    F64,
)
from rcdiag.metrics.token_sums import SAFETY_BOUND

# ----------------------------------------------------------------------------------------------
# Importance sampling (docs/correction.md)


@dataclass(frozen=True)
class Weights:
    """Token arrays of one IS configuration on one batch (0 at invalid positions)."""

    raw: F64
    applied: F64
    row_log_ratio: F64 | None  # S_i at sequence level


@dataclass(frozen=True)
class RowWeights:
    """Sequence-level R and W, one value per row (what the row's valid tokens carry)."""

    raw: F64
    applied: F64


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

    vectorised: ClassVar[bool] = True  # metrics() reads arrays of steps too
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

    def raw(self, view: TokenView) -> F64:
        """R of the batch (shared by every configuration of the level)."""
        level = self.plan.level
        return view.memo(("raw_weights", level), lambda: raw_weights(view, level))

    def row_weights(self, view: TokenView) -> RowWeights:
        """At sequence level, R and W of each row (what the token arrays repeat on its valid
        tokens), without a token array."""
        if self.plan.level == "token":
            raise ValueError("token-level weights are not one value per row")
        return view.memo(("row_weights", *self.weights_key[1:]), lambda: self._row_weights(view))

    def _row_weights(self, view: TokenView) -> RowWeights:
        plan = self.plan
        raw = np.exp(np.clip(view.seq_sum, -SAFETY_BOUND, SAFETY_BOUND))
        if plan.icepop:
            applied = np.where((raw >= plan.lo) & (raw <= plan.hi), raw, 0.0)
        else:
            applied = np.minimum(raw, plan.hi)
        return RowWeights(raw, applied)

    def _weights(self, view: TokenView) -> Weights:
        """W is R itself (the same array, so that every sum, extreme and square of it is shared)
        when the batch has no valid R that W would change: read from each row's extremes of R,
        which the metrics read anyway (R > hi truncated; with IcePop, R outside [lo, hi])."""
        plan = self.plan
        row = None if plan.level == "token" else view.seq_sum
        raw = self.raw(view)
        if self._changes_none(view, raw):
            applied = raw
        elif plan.icepop:
            applied = np.where((raw >= plan.lo) & (raw <= plan.hi), raw, 0.0)
        else:
            applied = np.minimum(raw, plan.hi)
        return Weights(raw, applied, row)

    def _changes_none(self, view: TokenView, raw: F64) -> bool:
        """Whether every valid R lies in [0, hi] (IcePop: in [lo, hi]); invalid positions hold 0,
        which both W keep. (A NaN extreme fails the test.)"""
        if self.plan.level != "token" or not (view.valid_max(raw) <= self.plan.hi).all():
            return False
        return not self.plan.icepop or bool((view.valid_min(raw) >= self.plan.lo).all())

    def row_stats(self, view: TokenView) -> RowStats:
        if self.plan.level != "token":
            return self._sequence_row_stats(view)
        plan, w = self.plan, self.weights(view)
        legacy = self.dialect == "legacy"
        measured = w.raw if legacy else w.applied
        # latest: W already lies in [0, hi] (0 at invalid positions), so clip(W, 0, hi) is W;
        # legacy: clip(R, lo, hi) is R when every valid R lies in [lo, hi]
        band = w.applied
        if legacy:
            inside = (view.valid_min(w.raw) >= plan.lo).all() and (
                view.valid_max(w.raw) <= plan.hi
            ).all()
            band = w.raw if inside else view.valid(np.clip(w.raw, plan.lo, plan.hi))
        stats = weight_row_stats(view, w.raw, measured, band, w.row_log_ratio, plan.lo, plan.hi)
        # R < lo and R > hi never hold together (lo ≤ hi): out of the band is low plus high
        low, high = stats["low"], stats["high"]
        if plan.lo <= plan.hi and not isinstance(low, Moments) and not isinstance(high, Moments):
            stats["oob"] = low + high
        else:
            stats["oob"] = view.count((w.raw < plan.lo) | (w.raw > plan.hi))
        stats["applied_sum"] = view.row_sum(w.applied)
        stats["applied_row_mean"] = view.row_mean(w.applied)
        stats["applied_sq"] = view.row_sum(view.squares(w.applied))
        return stats

    def _sequence_row_stats(self, view: TokenView) -> RowStats:
        """:meth:`row_stats` at sequence level, from one weight per row: every token array there
        repeats its row's value v on the n_i valid tokens, so a row's sum is n_i·v, its mean v,
        its spread 0 (the token sums give the same up to their rounding)."""
        plan, w, n = self.plan, self.row_weights(view), view.n
        legacy = self.dialect == "legacy"
        measured = w.raw if legacy else w.applied
        band = np.clip(w.raw, plan.lo, plan.hi) if legacy else w.applied
        nonempty = view.nonempty
        s = np.where(nonempty, measured, 0.0)  # verl's per-row mean of the repeated weight
        r = np.where(nonempty, w.raw, 0.0)
        seq = view.seq_sum
        return {
            "sum": n * measured,
            "band": Moments(n, np.where(nonempty, band, 0.0), np.zeros(n.size)),
            "band_sq": n * band * band,
            "seq": view.row_moments(s),
            "seq_max": s,
            "seq_min": s,
            "seq_dev": np.abs(s - 1.0),
            "seq_high": (r > plan.hi).astype(np.float64),
            "seq_low": (r < plan.lo).astype(np.float64),
            "max": seq,
            "min": seq,
            "high": (seq > safe_log(plan.hi)).astype(np.float64),
            "low": (seq < safe_log(plan.lo)).astype(np.float64),
            "oob": n * ((w.raw < plan.lo) | (w.raw > plan.hi)),
            "applied_sum": n * w.applied,
            "applied_row_mean": np.where(nonempty, w.applied, 0.0),
            "applied_sq": n * w.applied * w.applied,
        }

    def batch_norm_factor(self, get: Getter) -> Any:
        """The batch-normalisation μ (docs/correction.md), or 1.0 when μ ≤ 1e-8 (weights unchanged):
        a float, or an array of one value per step when ``get`` reads arrays."""
        with np.errstate(all="ignore"):
            if self.plan.level == "token":
                mu = np.divide(get("applied_sum"), get("valid_tokens"))
            else:  # the legacy dialect (PR #4070) averaged over all rows, later over non-empty ones
                rows = get("rows") if self.dialect == "legacy" else get("nonempty_rows")
                mu = np.where(np.not_equal(rows, 0), np.divide(get("applied_row_mean"), rows), 0.0)
            factor = np.where(np.greater(mu, 1e-8), mu, 1.0)
        return float(factor) if factor.ndim == 0 else factor

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

    vectorised: ClassVar[bool] = True  # metrics() reads arrays of steps too
    kinds: ClassVar[dict[str, Kind]] = {"applied_sum": "sum", "applied_row_mean": "sum"}

    def row_stats(self, view: TokenView) -> RowStats:
        applied = Importance(self.plan, self.dialect).weights(view).applied
        return {"applied_sum": view.row_sum(applied), "applied_row_mean": view.row_mean(applied)}

    def metrics(self, get: Getter) -> Metrics:
        return {}
