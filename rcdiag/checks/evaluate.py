"""Evaluating rules on the results of a run, and the serializable check result.

Pure: takes the analyze result (and, for ``preset:`` rules, the compare-presets entries), the
bootstrap replicates and a parsed baseline (:mod:`rcdiag.model`); returns results. Rendering lives in
:mod:`rcdiag.checks.outputs`, reading and writing in the ``check`` command.
"""

from __future__ import annotations

import dataclasses
import math
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any, Literal

import numpy as np

from rcdiag.checks.baseline import Drift, compare
from rcdiag.checks.rules import Bound, CheckSettings, Rule, Severity
from rcdiag.formatting import fmt
from rcdiag.metrics.growth import Growth, growth_test, least_squares_slope
from rcdiag.metrics.ragged import F64
from rcdiag.metrics.records import record
from rcdiag.model import AnalysisResult, Baseline, ConfigurationResult, Diagnosis
from rcdiag.model.check import CHECK_KIND
from rcdiag.version import SCHEMA_VERSION

Status = Literal["pass", "fail", "warn", "skipped"]
STATUSES: tuple[Status, ...] = ("pass", "fail", "warn", "skipped")


@dataclass(frozen=True)
class CheckInputs:
    """Everything rules are evaluated against.

    Args:
        analysis: the analyze result of the current dump.
        presets: configuration name → its compare-presets result (``overall``, ``steps``), for
            the configurations the rules name.
        replicates: bootstrap replicates of the current dump's overall metrics (for baseline rules).
        baseline: the parsed baseline, if any.
    """

    analysis: AnalysisResult
    presets: Mapping[str, ConfigurationResult] = field(default_factory=dict)
    replicates: Mapping[str, F64] | None = None
    baseline: Baseline | None = None


@dataclass(frozen=True)
class RuleResult:
    """The outcome of one rule.

    Attributes:
        status: ``pass``; ``fail`` or ``warn`` (the rule's severity) when violated; ``skipped``
            when the value is null (e.g. a slope of a one-step dump).
        value: the aggregated value the rule judged (None when skipped).
        step: the step the value comes from (max/min/last step, the start of a rise).
        detail: one line explaining the value.
    """

    rule: Rule
    status: Status
    value: float | None
    step: int | None = None
    detail: str = ""
    drift: Drift | None = None
    trend: Growth | None = None

    def as_json(self) -> dict[str, Any]:
        rule = self.rule
        return {
            "name": rule.name,
            "expression": rule.expression,
            "metric": rule.metric,
            "preset": rule.preset,
            "aggregation": rule.aggregation,
            "absolute": rule.absolute,
            "severity": rule.severity,
            "limit": rule.limit,
            "status": self.status,
            "value": self.value,
            "step": self.step,
            "detail": self.detail,
            "why": rule.why,
            "baseline": None if self.drift is None else _drift_json(self.drift),
            "trend": None if self.trend is None else dataclasses.asdict(self.trend),
        }


def _drift_json(drift: Drift) -> dict[str, Any]:
    out = dataclasses.asdict(drift)
    out["interval"] = None if drift.interval is None else list(drift.interval)
    return out


Entry = AnalysisResult | ConfigurationResult
"""What a rule reads: the analysis, or a configuration's comparison (``preset:`` rules)."""


def _series(entry: Entry, metric: str) -> tuple[F64, F64]:
    entries = entry.step_results if isinstance(entry, AnalysisResult) else entry.steps
    steps = np.array([s.step for s in entries], dtype=np.float64)
    values = [None if s.metrics is None else s.metrics.get(metric) for s in entries]
    return steps, np.array([math.nan if v is None else v for v in values], dtype=np.float64)


def _aggregate(
    rule: Rule, entry: Entry, settings: CheckSettings
) -> tuple[float | None, int | None, str, Growth | None]:
    """(value, step, detail, trend) of ``rule``'s aggregation over one result."""
    if rule.aggregation == "overall":
        return entry.overall.get(rule.metric), None, "", None
    steps, values = _series(entry, rule.metric)
    finite = np.isfinite(values)
    count = int(finite.sum())
    if count == 0:
        return None, None, "no step has a value", None
    agg = rule.aggregation
    if agg == "mean_step":
        return float(values[finite].mean()), None, f"mean of {count} steps", None
    if agg in ("max_step", "min_step", "last_step"):
        candidates = np.flatnonzero(finite)
        if agg == "last_step":
            at = int(candidates[-1])
        else:
            pick = np.argmax if agg == "max_step" else np.argmin
            at = int(candidates[pick(values[finite])])
        step = int(steps[at])
        return float(values[at]), step, f"at step {step}", None
    if agg == "slope":
        slope = least_squares_slope(steps, values)
        if slope is None:
            return None, None, f"a slope needs two steps with a value ({count} here)", None
        return slope, None, f"least-squares slope per step over {count} steps", None
    direction: Literal["rise", "fall"] = "rise" if agg == "rise" else "fall"
    found = record(rule.metric)
    stderrs = None if found is None or found.stderr is None else _series(entry, found.stderr)[1]
    trend = growth_test(steps, values, settings.trend_alpha, stderrs, direction)
    if not trend.tested:
        return None, None, f"no trend test: {trend.reason}", trend
    if not trend.significant:
        detail = (
            f"no significant {direction} over {trend.steps} steps "
            f"(p = {trend.p_value:.2g} ≥ α = {settings.trend_alpha:g})"
        )
        return 0.0, None, detail, trend
    if trend.shape == "step":
        where = f"a step change at step {trend.change_step}"
    else:
        where = f"a sustained {direction} over {trend.steps} steps"
    # the rule's own α (the diagnosis's growing_drift uses its own, docs/rules.md)
    detail = (
        f"{where}: {fmt(trend.before)} → {fmt(trend.after)} "
        f"(p = {trend.p_value:.2g} < α = {settings.trend_alpha:g})"
    )
    return trend.relative_change, trend.change_step, detail, trend


def _compare_with_baseline(rule: Rule, inputs: CheckInputs, settings: CheckSettings) -> RuleResult:
    baseline = inputs.baseline
    assert baseline is not None and rule.baseline is not None
    current = inputs.analysis.overall.get(rule.metric)
    reference = baseline.overall.get(rule.metric)
    if current is None or reference is None:
        missing = "current run" if current is None else "baseline"
        return RuleResult(rule, "skipped", current, detail=f"no value in the {missing}")
    current_reps = None if inputs.replicates is None else inputs.replicates.get(rule.metric)
    drift = compare(
        current,
        reference,
        rule.baseline,
        abs_tol=settings.abs_tol if rule.abs_tol is None else rule.abs_tol,
        rel_tol=settings.rel_tol if rule.rel_tol is None else rule.rel_tol,
        confidence=settings.confidence,
        current_replicates=current_reps,
        baseline_replicates=baseline.bootstrap.get(rule.metric),
        absolute=rule.absolute,
    )
    if drift.interval is not None:
        lo, hi = drift.interval
        spread = f"{100 * settings.confidence:g}% CI [{fmt(lo)}, {fmt(hi)}]"
    else:
        spread = "no bootstrap interval for this metric"
    detail = (
        f"baseline {fmt(drift.baseline)}, Δ {fmt(drift.delta)}, {spread}, "
        f"tolerance {fmt(drift.tolerance)}"
    )
    status: Status = rule.severity if drift.regressed else "pass"
    return RuleResult(rule, status, drift.current, detail=detail, drift=drift)


def evaluate_rule(rule: Rule, inputs: CheckInputs, settings: CheckSettings) -> RuleResult:
    """Evaluate one rule (its names already validated by :func:`~rcdiag.checks.rules.validate_rules`)."""
    if rule.baseline is not None:
        return _compare_with_baseline(rule, inputs, settings)
    entry = inputs.analysis if rule.preset is None else inputs.presets[rule.preset]
    value, step, detail, trend = _aggregate(rule, entry, settings)
    if value is None or math.isnan(value):
        return RuleResult(rule, "skipped", None, step, detail or "no value", trend=trend)
    if rule.absolute:
        value = abs(value)
    status: Status = "pass" if rule.holds(value) else rule.severity
    return RuleResult(rule, status, value, step, detail, trend=trend)


def evaluate_rules(
    rules: Sequence[Rule], inputs: CheckInputs, settings: CheckSettings
) -> list[RuleResult]:
    """One result per rule, in order."""
    return [evaluate_rule(rule, inputs, settings) for rule in rules]


def diagnosis_results(diagnosis: Diagnosis) -> list[RuleResult]:
    """The diagnosis gate of the default rules: one result per diagnosed cause, ``fail`` for a
    cause of severity ``act`` and ``warn`` for ``watch`` (docs/rules.md)."""
    results = []
    for cause in diagnosis.causes:
        severity: Severity = "fail" if cause.severity == "act" else "warn"
        rule = Rule(
            metric=f"diagnosis/{cause.id}",
            upper=Bound(0.0),
            severity=severity,
            name=f"diagnosis: {cause.id} ({cause.severity})",
            why=cause.advice,
        )
        results.append(RuleResult(rule, severity, None, detail=cause.summary))
    return results


def passed(results: Sequence[RuleResult]) -> bool:
    """No fail-severity rule failed (warnings and skipped rules do not fail a run)."""
    return all(r.status != "fail" for r in results)


def check_document(
    inputs: CheckInputs,
    results: Sequence[RuleResult],
    settings: CheckSettings,
    baseline_origin: str | None = None,
) -> dict[str, Any]:
    """The serializable result of ``rcdiag check`` (``--json``); every output renders from it."""
    analysis = inputs.analysis
    baseline = None
    if inputs.baseline is not None:
        b = inputs.baseline
        baseline = {
            "path": baseline_origin,
            "created": b.created,
            "rcdiag_version": b.rcdiag_version,
            "dialect": b.dialect,
            "source": b.source.to_json(),
            "seed": b.seed,
            "replicates": b.replicates,
        }
    counts = {status: sum(r.status == status for r in results) for status in STATUSES}
    ok = passed(results)
    return {
        "schema_version": SCHEMA_VERSION,
        "kind": CHECK_KIND,
        "rcdiag_version": analysis.rcdiag_version,
        "dialect": analysis.dialect,
        "source": analysis.source.to_json(),
        "baseline": baseline,
        "settings": dataclasses.asdict(settings),
        "diagnosis": analysis.diagnosis.to_json(),
        "passed": ok,
        "exit_code": 0 if ok else 1,
        "counts": counts,
        "rules": [r.as_json() for r in results],
    }
