"""The built-in rule set: the metric registry's bands as rules, and baseline comparisons for the
metrics that measure the mismatch.

Each band of :data:`rcdiag.metrics.records.JUDGED` becomes one rule on the overall value: an ``act``
band fails the run, a ``watch`` band is reported and passes. With the diagnosis gate of the check
command (a cause of severity ``act`` fails), ``rcdiag check`` with its default rules exits 1 exactly
when the verdict is ``act``.
"""

from __future__ import annotations

from collections.abc import Collection

from rcdiag.checks.rules import Bound, Direction, Rule
from rcdiag.metrics.records import (
    ABS_LOG_RATIO_MEAN,
    CATASTROPHIC_TOKENS,
    CHI2_TOKEN,
    ESS_TOKEN,
    K3_KL,
    LOG_PPL_ABS_DIFF,
    RATIO_OUTSIDE_HALF_TWO,
    RATIO_OUTSIDE_TENTH,
    RECORDS,
    VETO_FRACTION,
    Band,
    MetricRecord,
)

BASELINE_DIRECTIONS: dict[str, Direction] = {
    K3_KL.name: "higher",
    CHI2_TOKEN.name: "higher",
    LOG_PPL_ABS_DIFF.name: "higher",
    ABS_LOG_RATIO_MEAN.name: "higher",
    RATIO_OUTSIDE_TENTH.name: "higher",
    RATIO_OUTSIDE_HALF_TWO.name: "higher",
    VETO_FRACTION.name: "higher",
    CATASTROPHIC_TOKENS.name: "higher",
    ESS_TOKEN.name: "lower",
}
"""Mismatch metrics compared with a baseline by default, and which way is worse. Left out: ``kl``
(for a symmetric mismatch its plain estimator Σ(−ℓ)/V is zero-mean noise; ``k3_kl`` gates the KL),
and ``chi2_seq`` and ``ess_seq``: with long responses the sequence weights exp(S_i) are so
heavy-tailed that both are set by the largest few weights, extreme-value statistics whose bootstrap
interval is too narrow (measured: false alarms between same-distribution dumps). Add them as rules
of your own where responses are short."""

RARE_EVENT_ABS_TOL: dict[str, float] = {
    VETO_FRACTION.name: 0.01,
    CATASTROPHIC_TOKENS.name: 1e-4,
    RATIO_OUTSIDE_HALF_TWO.name: 1e-3,
    RATIO_OUTSIDE_TENTH.name: 1e-3,
}
"""Absolute tolerance floors of the default baseline rules on shares of rare events. A baseline
with no such event has replicates that are all 0, so the bootstrap cannot express its uncertainty;
without a floor a handful of events in the current dump would read as drift."""


def from_band(record: MetricRecord, band: Band) -> Rule:
    """The CI rule that passes exactly when ``record``'s value does not breach ``band``.

    Example:
        >>> from rcdiag.metrics.records import K3_KL
        >>> [from_band(K3_KL, b).expression for b in K3_KL.bands]
        ['warn: rollout_corr/k3_kl.overall <= 0.001', 'rollout_corr/k3_kl.overall <= 0.1']
    """
    lower = upper = None
    if isinstance(band.limit, tuple):
        lower, upper = Bound(band.limit[0]), Bound(band.limit[1])
    elif record.worse == "lower":
        lower = Bound(band.limit)
    else:
        upper = Bound(band.limit)
    return Rule(
        metric=record.name,
        lower=lower,
        upper=upper,
        absolute=record.worse == "abs",
        severity="fail" if band.status == "act" else "warn",
        why=f"{band.status} band — {band.source}",
    )


def registry_rules() -> tuple[Rule, ...]:
    """One rule per band of every registry record."""
    return tuple(from_band(record, band) for record in RECORDS for band in record.bands)


def baseline_rules(abs_tol: float = 0.0) -> tuple[Rule, ...]:
    """Drift rules for :data:`BASELINE_DIRECTIONS`; ``abs_tol`` is the run's absolute tolerance,
    raised to :data:`RARE_EVENT_ABS_TOL` where that is larger."""
    return tuple(
        Rule(
            metric=metric,
            baseline=direction,
            abs_tol=max(abs_tol, RARE_EVENT_ABS_TOL[metric])
            if metric in RARE_EVENT_ABS_TOL
            else None,
            why="drift against the baseline beyond tolerance (bootstrap interval, docs/rules.md)",
        )
        for metric, direction in BASELINE_DIRECTIONS.items()
    )


def default_rules(
    available: Collection[str], with_baseline: bool, abs_tol: float = 0.0
) -> tuple[Rule, ...]:
    """The rules ``rcdiag check`` evaluates when given none, restricted to ``available`` metrics.

    Rules on metrics the run does not produce (the IS-weight metrics exist only for a preset;
    verl's veto metrics only in the legacy dialect) are left out.
    """
    rules = list(registry_rules())
    if with_baseline:
        rules += baseline_rules(abs_tol)
    return tuple(r for r in rules if r.metric in available)
