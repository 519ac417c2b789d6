"""Health verdicts: the published thresholds of contract §5 as data, and their evaluation."""

from __future__ import annotations

import operator
from collections.abc import Callable, Iterable, Mapping
from dataclasses import dataclass
from typing import Literal

Status = Literal["ok", "warn", "fail"]
_SEVERITY: dict[str, int] = {"ok": 0, "warn": 1, "fail": 2}


@dataclass(frozen=True)
class HealthRule:
    """``metric`` is unhealthy (``status``) when ``value <op> threshold`` holds.

    ``op`` is one of ``>``, ``<``, ``abs>``, ``outside`` (threshold = (lo, hi)).
    """

    metric: str
    op: Literal[">", "<", "abs>", "outside"]
    threshold: float | tuple[float, float]
    status: Status
    why: str

    def breached(self, value: float) -> bool:
        if self.op == "outside":
            assert isinstance(self.threshold, tuple)
            low, high = self.threshold
            return not low <= value <= high
        assert isinstance(self.threshold, float)
        compare: Callable[[float, float], bool] = operator.gt if self.op != "<" else operator.lt
        return compare(abs(value) if self.op == "abs>" else value, self.threshold)


HEALTH_RULES: tuple[HealthRule, ...] = (
    HealthRule("rollout_corr/kl", "abs>", 0.1, "warn", "verl docs: |kl| > 0.1 is a large mismatch"),
    HealthRule(
        "rollout_corr/k3_kl",
        ">",
        1e-3,
        "warn",
        "NeMo-RL gates bf16 at token KL < 1e-3; dense bf16 models sit at 1e-5…1e-3",
    ),
    HealthRule(
        "rollout_corr/chi2_token",
        ">",
        1.0,
        "fail",
        "verl docs: chi2_token > 1 is severe (IS weight variance dominates)",
    ),
    HealthRule(
        "rcdiag/abs_log_ratio_mean",
        ">",
        0.1,
        "warn",
        "slime gates at mean |Δ log p| ≤ 0.1 (≈ 0.01 healthy bf16, ≈ 0.27 fp8 rollout)",
    ),
    HealthRule(
        "rcdiag/veto_fraction",
        ">",
        0.1,
        "warn",
        "verl docs: more than 10% of sequences hold a catastrophic token",
    ),
    HealthRule(
        "rollout_corr/rollout_is_veto_fraction",
        ">",
        0.1,
        "warn",
        "verl docs: veto fraction > 0.1",
    ),
    HealthRule(
        "rcdiag/ess_token",
        "<",
        0.3,
        "warn",
        "verl docs: effective sample size < 0.3 means few tokens carry the weight",
    ),
    HealthRule(
        "rollout_corr/rollout_is_mean",
        "outside",
        (0.5, 2.0),
        "warn",
        "verl docs: IS weight mean should stay within [0.5, 2.0]",
    ),
    HealthRule(
        "rollout_corr/rollout_is_eff_sample_size",
        "<",
        0.3,
        "warn",
        "verl docs: IS effective sample size < 0.3",
    ),
    HealthRule("rollout_corr/rollout_is_std", ">", 1.0, "warn", "verl docs: IS weight std > 1.0"),
)


def _threshold_json(rule: HealthRule) -> float | list[float]:
    return list(rule.threshold) if isinstance(rule.threshold, tuple) else rule.threshold


def evaluate(
    metrics: Mapping[str, float | None],
    rules: tuple[HealthRule, ...] = HEALTH_RULES,
    skip: tuple[str, ...] = (),
) -> list[dict[str, object]]:
    """One check per rule whose metric is present, not null and not in ``skip`` (contract §4
    ``checks``)."""
    checks: list[dict[str, object]] = []
    for rule in rules:
        value = metrics.get(rule.metric)
        if value is None or rule.metric in skip:
            continue
        checks.append(
            {
                "metric": rule.metric,
                "value": value,
                "status": rule.status if rule.breached(value) else "ok",
                "threshold": _threshold_json(rule),
                "why": rule.why,
            }
        )
    return checks


def worst(statuses: Iterable[object]) -> Status:
    """The most severe of the given statuses (``ok`` for none)."""
    found: Status = "ok"
    for status in statuses:
        if _SEVERITY[str(status)] > _SEVERITY[found]:
            found = status  # type: ignore[assignment]
    return found
