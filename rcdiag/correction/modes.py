"""Other frameworks' correction modes, dry-run beside verl's (docs/frameworks.md, "Corrections").

A mode is a :class:`ModePlan` of the parts in :mod:`rcdiag.correction.external`. Its summary
figures (:data:`~rcdiag.correction.figures.SUMMARY_FIGURES`) come from :class:`ExternalOutcome`,
with the same statistics as verl's :class:`~rcdiag.correction.outcome.Outcome`; each framework
adds a component for the metrics it logs (:meth:`ExternalPlan.components`).

A mode whose every part is one value per row (a sequence- or geometric-level ratio, rules that
keep or drop whole rows) is summed per row, without a token array: a row's kept tokens all carry
its weight, so their sum is n_i·W_i (as verl's sequence-level weights are).
"""

from __future__ import annotations

from abc import ABC, abstractmethod
from dataclasses import dataclass
from typing import ClassVar, Literal

import numpy as np

from rcdiag.correction.engine import Component, Getter, Metrics, RowStats
from rcdiag.correction.external import (
    Band,
    MeanExpAbsRows,
    OutlierRows,
    RowRule,
    Rule,
    TokenRule,
    Veto,
    Weights,
    keep_mask,
    ratio_rows,
    ratio_tokens,
)
from rcdiag.correction.outcome import KEPT_KINDS, REJECTION_KINDS
from rcdiag.correction.view import TokenView
from rcdiag.metrics.grouped import Kind
from rcdiag.metrics.ragged import F64, Bool


class ExternalPlan(ABC):
    """What a framework's correction mode computes; frozen and hashable like a verl plan."""

    framework: str

    @abstractmethod
    def outcome(self) -> ExternalOutcome:
        """The component behind the summary figures."""

    def components(self) -> tuple[Component, ...]:
        """The components whose metrics the framework logs for this mode, then the outcome."""
        return (self.outcome(),)


@dataclass(frozen=True)
class ModePlan(ExternalPlan):
    """A correction mode: weights (None: no IS), rejection rules, batch normalisation."""

    framework: str
    weights: Weights | None
    rules: tuple[Rule, ...] = ()
    normalize: Literal["token", "sequence"] | None = None

    def outcome(self) -> ExternalOutcome:
        return ExternalOutcome(self)


def _judges_rows(rule: Rule) -> bool:
    """Whether a rule keeps or drops whole rows."""
    if isinstance(rule, Band):
        return rule.ratio.row_level
    return isinstance(rule, Veto | OutlierRows | MeanExpAbsRows | RowRule)


def _row_level(plan: ModePlan) -> bool:
    """Whether every part of the mode is one value per row: its weights from a row-level ratio
    (with row-level bands only; a framework's own weights, which define their token values
    themselves, are summed over tokens), its rules judging whole rows."""
    weights = plan.weights
    if weights is not None and not (
        type(weights) is Weights
        and weights.ratio.row_level
        and all(band.ratio.row_level for band in weights.zero)
    ):
        return False
    return all(_judges_rows(rule) for rule in plan.rules)


def _kept_rows(view: TokenView, rules: tuple[Rule, ...]) -> Bool:
    """Per row: it has a valid token and every rule (each judging whole rows) keeps it."""

    def compute() -> Bool:
        keep = view.nonempty.copy()
        for rule in rules:
            if isinstance(rule, Band):
                keep &= rule.inside_rows(view)
            elif isinstance(rule, TokenRule):
                raise ValueError("a token rule does not judge whole rows")
            else:
                keep &= rule.keep_rows(view)
        return keep

    return view.memo(("ext_kept_rows", rules), compute)


def _kept_float(view: TokenView, plan: ModePlan) -> F64 | None:
    keep = keep_mask(view, plan.rules)
    if keep is None:
        return None
    return view.memo(("ext_kept_float", plan.rules), lambda: (keep & view.mask).astype(np.float64))


@dataclass(frozen=True)
class ExternalOutcome(Component):
    """The statistics of a mode's summary figures: rejection, kept weights, normalisation."""

    plan: ModePlan

    kinds: ClassVar[dict[str, Kind]] = {
        **REJECTION_KINDS,
        "norm_token_sum": "sum",
        "norm_row_mean": "sum",
    }
    run_kinds: ClassVar[dict[str, Kind]] = KEPT_KINDS

    def row_stats(self, view: TokenView) -> RowStats:
        if _row_level(self.plan):
            kept = np.where(_kept_rows(view, self.plan.rules), view.n, 0.0)
        else:
            kept_float = _kept_float(view, self.plan)
            kept = view.n if kept_float is None else view.row_sum(kept_float)
        rejected = view.n - kept
        stats: RowStats = {
            "rejected": rejected,
            "rejected_rows": (rejected > 0).astype(np.float64),
            "fully_rejected_rows": ((rejected == view.n) & view.nonempty).astype(np.float64),
            "kept": kept,
        }
        weights = self.plan.weights
        if self.plan.normalize is not None and weights is not None:
            if _row_level(self.plan):
                rows = np.where(view.nonempty, weights.rows(view), 0.0)
                with np.errstate(over="ignore", invalid="ignore"):
                    stats["norm_token_sum"], stats["norm_row_mean"] = view.n * rows, rows
            else:
                applied = weights.applied(view)
                stats["norm_token_sum"] = view.row_sum(applied)
                stats["norm_row_mean"] = view.row_mean(applied)
        return stats

    def run_stats(self, view: TokenView) -> dict[str, F64]:
        if _row_level(self.plan):
            return self._row_run_stats(view)
        weights = self.plan.weights
        kept_float = _kept_float(view, self.plan)
        if weights is None:
            kept = view.run_sum(view.mask_weights if kept_float is None else kept_float)
            return {
                "kept_raw": kept,
                "kept_applied": kept,
                "kept_applied_sq": kept,
                "kept_applied_max": np.where(kept > 0, 1.0, -np.inf),
            }

        raw = ratio_tokens(view, weights.ratio)
        applied = weights.applied(view)

        def sums() -> tuple[object, dict[str, F64]]:
            with np.errstate(over="ignore", invalid="ignore"):
                raw_sum = view.run_sum(raw, kept_float)
                return (raw, applied, kept_float), {
                    "kept_raw": raw_sum,
                    "kept_applied": raw_sum
                    if applied is raw
                    else view.run_sum(applied, kept_float),
                    "kept_applied_sq": view.run_sum(view.squares(applied), kept_float),
                    "kept_applied_max": view.run_max(applied, kept_float),
                }

        # keyed by the arrays (held by the entry): modes whose weights are the ratio itself, and
        # that drop no token of the batch, share one set of sums
        arrays = (id(raw), id(applied), None if kept_float is None else id(kept_float))
        return view.memo(("ext_kept_sums", *arrays), sums)[1]

    def _row_run_stats(self, view: TokenView) -> dict[str, F64]:
        """:meth:`run_stats` of a row-level mode: row i's kept tokens all carry R_i and W_i, so
        their sums are n_i·R_i, n_i·W_i and n_i·W_i²; a run's largest kept W is its kept rows'
        largest (0 at a position not kept, as on the token path: W ≥ 0; −inf without one)."""
        weights, n = self.plan.weights, view.n
        kept = _kept_rows(view, self.plan.rules)
        if weights is None:
            count = view.run_row_sum(np.where(kept, n, 0.0))
            return {
                "kept_raw": count,
                "kept_applied": count,
                "kept_applied_sq": count,
                "kept_applied_max": np.where(count > 0, 1.0, -np.inf),
            }
        raw, applied = ratio_rows(view, weights.ratio), weights.rows(view)
        dropped = np.where(view.lengths > 0, 0.0, -np.inf)
        with np.errstate(over="ignore", invalid="ignore"):
            return {
                "kept_raw": view.run_row_sum(np.where(kept, n * raw, 0.0)),
                "kept_applied": view.run_row_sum(np.where(kept, n * applied, 0.0)),
                "kept_applied_sq": view.run_row_sum(np.where(kept, n * applied * applied, 0.0)),
                "kept_applied_max": view.run_row_max(np.where(kept, applied, dropped)),
            }

    def normalisation(self, get: Getter) -> float:
        """slime's batch normalisation μ (1.0 when off or μ ≤ 1e-8): the pooled mean of W over
        the valid tokens, or the mean over all rows of each row's mean W."""
        if self.plan.normalize is None or self.plan.weights is None:
            return 1.0
        if self.plan.normalize == "token":
            mu = get("norm_token_sum") / get("valid_tokens")
        else:
            mu = get("norm_row_mean") / get("rows")
        return mu if mu > 1e-8 else 1.0

    def metrics(self, get: Getter) -> Metrics:
        return {}
