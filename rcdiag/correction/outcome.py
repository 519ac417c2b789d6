"""What a whole configuration does: its parts, its keep mask, the weights that survive it, and
verl's helper on one batch (docs/correction.md)."""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any, ClassVar

import numpy as np

from rcdiag.correction.config import CorrectionPlan
from rcdiag.correction.engine import Component, Getter, Metrics, RowStats
from rcdiag.correction.importance import Importance
from rcdiag.correction.rejection import Judged, LegacyRejectionRule, Rejection, Veto
from rcdiag.correction.view import CAP_FLOOR, TokenView
from rcdiag.metrics.grouped import Kind, Moments
from rcdiag.metrics.ragged import (
    F64,
    Bool,
    RaggedBatch,
)

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


REJECTION_KINDS: dict[str, Kind] = {
    "rejected": "sum",
    "rejected_rows": "sum",
    "fully_rejected_rows": "sum",
    "kept": "sum",
}
"""Per row, what a configuration rejects and keeps (any framework's, summed per step)."""
KEPT_KINDS: dict[str, Kind] = {
    "kept_raw": "sum",
    "kept_applied": "sum",
    "kept_applied_sq": "sum",
    "kept_applied_max": "max",
}
"""Per run of rows, the raw and applied weights of the kept tokens: Σ R, Σ W, Σ W², max W."""


@dataclass(frozen=True)
class Outcome(Component):
    """What a whole configuration does: combined rejection and the weights that survive it.

    Feeds verl's overall ``rollout_rs_masked_fraction`` (latest dialect) and rcdiag's summary.
    Configurations sharing their rejection rules, or their weights, share those per-batch passes.
    """

    plan: CorrectionPlan

    vectorised: ClassVar[bool] = True  # metrics() reads arrays of steps too
    kinds: ClassVar[dict[str, Kind]] = REJECTION_KINDS
    run_kinds: ClassVar[dict[str, Kind]] = KEPT_KINDS

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
        if plan.importance is None:
            return _unit_weights(view.run_sum(view.mask_weights if keep is None else keep))
        importance = Importance(plan.importance, plan.dialect)
        if keep is None and plan.importance.level != "token":  # one weight per row, all kept
            return self._row_kept_sums(view, np.ones(view.n.size, dtype=bool))
        if keep is None and not plan.importance.icepop and view.one_run:
            cap = plan.importance.hi
            if cap >= CAP_FLOOR:  # truncation only: the weights above the floor are capped
                key = ("kept_sums", importance.weights_key, None)
                return view.memo(key, lambda: view.capped(importance.raw(view), cap))
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
            return _unit_weights(kept)
        importance = Importance(self.plan.importance, self.plan.dialect)
        if self.plan.importance.level != "token":  # a row's tokens repeat its weight
            rows = importance.row_weights(view)
            n, applied_row = view.n, rows.applied
            # the largest applied weight over a row's positions: 0 at its invalid ones
            top = np.where(view.nonempty, applied_row, np.where(view.lengths > 0, 0.0, -np.inf))
            return {
                "kept_raw": view.run_row_sum(n * rows.raw * kept_rows),
                "kept_applied": view.run_row_sum(n * applied_row * kept_rows),
                "kept_applied_sq": view.run_row_sum(n * applied_row * applied_row * kept_rows),
                "kept_applied_max": view.run_row_max(np.where(row_keep, top, 0.0)),
            }
        weights = importance.weights(view)
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


def _unit_weights(kept: F64) -> dict[str, F64]:
    """The kept sums without IS: every kept token has weight 1 (``kept`` tokens per run)."""
    return {
        "kept_raw": kept,
        "kept_applied": kept,
        "kept_applied_sq": kept,
        "kept_applied_max": np.where(kept > 0, 1.0, -np.inf),
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
