"""The built-in rule set: contract §5 thresholds (from :data:`rcdiag.health.HEALTH_RULES`), trend
gates, and baseline comparisons for the metrics that measure the mismatch.

Severity in CI: a health rule marked ``fail`` (χ²_token > 1, "severe") fails the run, and so do the
two thresholds the contract names as *gates other frameworks' CI uses* (:data:`CI_GATES`: NeMo-RL's
token KL < 1e-3, slime's mean |Δ log p| ≤ 0.1); the other verl-documentation thresholds warn.
"""

from __future__ import annotations

from collections.abc import Collection

from rcdiag.checks.rules import Bound, Direction, Rule, Severity
from rcdiag.health import HEALTH_RULES, HealthRule

CI_GATES: frozenset[str] = frozenset({"rollout_corr/k3_kl", "rcdiag/abs_log_ratio_mean"})
"""Health metrics whose contract §5 threshold is a CI gate elsewhere: ``fail`` severity here."""

MAX_RISE = 0.5
"""Default trend gate: a significant sustained rise of more than 50 % within one dump fails."""

TREND_METRICS: tuple[str, ...] = ("rollout_corr/k3_kl", "rcdiag/abs_log_ratio_mean")
"""Metrics gated by default on a sustained rise over steps (the two CI gates)."""

BASELINE_DIRECTIONS: dict[str, Direction] = {
    "rollout_corr/k3_kl": "higher",
    "rollout_corr/chi2_token": "higher",
    "rollout_corr/log_ppl_abs_diff": "higher",
    "rcdiag/abs_log_ratio_mean": "higher",
    "rcdiag/ratio_outside_0.9_1.1": "higher",
    "rcdiag/ratio_outside_0.5_2": "higher",
    "rcdiag/veto_fraction": "higher",
    "rcdiag/catastrophic_token_fraction": "higher",
    "rcdiag/ess_token": "lower",
}
"""Mismatch metrics compared with a baseline by default, and which way is worse. Left out: ``kl``
(for a symmetric mismatch its plain estimator Σ(−ℓ)/V is zero-mean noise; ``k3_kl`` gates the KL),
and ``chi2_seq`` and ``ess_seq``: with long responses the sequence weights exp(S_i) are so
heavy-tailed that both are set by the largest few weights, extreme-value statistics whose bootstrap
interval is too narrow (measured: false alarms between same-distribution dumps). Add them as rules
of your own where responses are short."""

RARE_EVENT_ABS_TOL: dict[str, float] = {
    "rcdiag/veto_fraction": 0.01,
    "rcdiag/catastrophic_token_fraction": 1e-4,
    "rcdiag/ratio_outside_0.5_2": 1e-3,
    "rcdiag/ratio_outside_0.9_1.1": 1e-3,
}
"""Absolute tolerance floors of the default baseline rules on shares of rare events. A baseline
with no such event has replicates that are all 0, so the bootstrap cannot express its uncertainty;
without a floor a handful of events in the current dump would read as drift."""


def from_health_rule(rule: HealthRule) -> Rule:
    """The CI rule that passes exactly when the health rule is not breached.

    Example:
        >>> from rcdiag.health import HEALTH_RULES
        >>> [from_health_rule(r).expression for r in HEALTH_RULES[:2]]
        ['warn: abs(rollout_corr/kl.overall) <= 0.1', 'rollout_corr/k3_kl.overall <= 0.001']
    """
    severity: Severity = "fail" if rule.status == "fail" or rule.metric in CI_GATES else "warn"
    lower = upper = None
    if rule.op == "outside":
        assert isinstance(rule.threshold, tuple)
        lower, upper = Bound(rule.threshold[0]), Bound(rule.threshold[1])
    elif rule.op == "<":
        assert isinstance(rule.threshold, float)
        lower = Bound(rule.threshold)
    else:
        assert isinstance(rule.threshold, float)
        upper = Bound(rule.threshold)
    return Rule(
        metric=rule.metric,
        lower=lower,
        upper=upper,
        absolute=rule.op == "abs>",
        severity=severity,
        why=f"published threshold — {rule.why}",
    )


def trend_rules() -> tuple[Rule, ...]:
    return tuple(
        Rule(
            metric=metric,
            aggregation="rise",
            upper=Bound(MAX_RISE),
            why="a sustained rise within the run (Pettitt change point, docs/rules.md)",
        )
        for metric in TREND_METRICS
    )


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

    Health rules on metrics the run does not produce (the IS-weight metrics exist only for a preset;
    verl's veto metrics only in the legacy dialect) are left out.
    """
    rules = [from_health_rule(r) for r in HEALTH_RULES]
    rules += trend_rules()
    if with_baseline:
        rules += baseline_rules(abs_tol)
    return tuple(r for r in rules if r.metric in available)
