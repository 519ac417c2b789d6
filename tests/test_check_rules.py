"""Rules of `rcdiag check`: the compact grammar, the TOML schema, validation, the default set."""

from __future__ import annotations

import math
from pathlib import Path

import pytest

from rcdiag.checks.catalog import analysis_metric_names
from rcdiag.checks.defaults import (
    BASELINE_DIRECTIONS,
    RARE_EVENT_ABS_TOL,
    default_rules,
    from_band,
)
from rcdiag.checks.rules import AGGREGATIONS, Bound, CheckSettings, Rule, parse_rule
from rcdiag.checks.rules_file import parse_rules_toml
from rcdiag.checks.validation import MetricCatalog, referenced_presets, validate_rules
from rcdiag.errors import UsageError
from rcdiag.metrics.analysis import AnalyzeOptions
from rcdiag.metrics.records import JUDGED as RECORDS

DOCS = Path(__file__).resolve().parent.parent / "docs"
NAMES = analysis_metric_names(AnalyzeOptions())


@pytest.mark.parametrize("aggregation", list(AGGREGATIONS))
def test_every_aggregation_parses(aggregation: str) -> None:
    rule = parse_rule(f"rollout_corr/k3_kl.{aggregation} < 1e-3")
    assert (rule.metric, rule.aggregation) == ("rollout_corr/k3_kl", aggregation)
    assert rule.upper == Bound(1e-3, inclusive=False) and rule.lower is None
    assert rule.name == f"rollout_corr/k3_kl.{aggregation} < 1e-3"


@pytest.mark.parametrize(
    ("text", "lower", "upper", "ok", "bad"),
    [
        ("m.overall < 1", None, Bound(1, False), 0.99, 1.0),
        ("m.overall <= 1", None, Bound(1, True), 1.0, 1.01),
        ("m.overall > 1", Bound(1, False), None, 1.01, 1.0),
        ("m.overall >= 1", Bound(1, True), None, 1.0, 0.99),
        ("0.5 <= m.overall <= 2", Bound(0.5, True), Bound(2, True), 2.0, 2.01),
        ("0.5 < m.overall < 2", Bound(0.5, False), Bound(2, False), 1.0, 0.5),
    ],
)
def test_operators_and_ranges(
    text: str, lower: Bound | None, upper: Bound | None, ok: float, bad: float
) -> None:
    rule = parse_rule(text)
    assert (rule.lower, rule.upper) == (lower, upper)
    assert rule.holds(ok) and not rule.holds(bad)
    assert not rule.holds(math.nan)
    assert parse_rule(rule.expression) == Rule(**{**rule.__dict__, "name": rule.expression})


def test_issue_examples_parse() -> None:
    k3, chi2, abs_mean, preset = (
        parse_rule(t)
        for t in (
            "rollout_corr/k3_kl.overall < 1e-3",
            "rollout_corr/chi2_token.max_step <= 1",
            "rcdiag/abs_log_ratio_mean.last_step <= 0.1",
            "preset:decoupled_geo_rs/rollout_corr/rollout_rs_masked_fraction.overall < 0.05",
        )
    )
    assert k3.upper == Bound(0.001, False)
    assert (chi2.aggregation, abs_mean.aggregation) == ("max_step", "last_step")
    assert preset.preset == "decoupled_geo_rs"
    assert preset.metric == "rollout_corr/rollout_rs_masked_fraction"
    assert referenced_presets([k3, preset, preset]) == ["decoupled_geo_rs"]


def test_names_with_dots_abs_severity_and_baseline() -> None:
    assert parse_rule("rcdiag/log_ratio_p99.9 < 1").metric == "rcdiag/log_ratio_p99.9"
    quantile = parse_rule("rcdiag/log_ratio_p99.9.max_step < 1")
    assert (quantile.metric, quantile.aggregation) == ("rcdiag/log_ratio_p99.9", "max_step")
    assert parse_rule("rcdiag/ratio_outside_0.9_1.1 < 1").aggregation == "overall"
    kl = parse_rule("warn:  abs(rollout_corr/kl.mean_step)   <= 0.1")
    assert kl.absolute and kl.severity == "warn" and kl.aggregation == "mean_step"
    assert kl.name == "warn: abs(rollout_corr/kl.mean_step) <= 0.1"
    assert parse_rule("rcdiag/ess_token.overall >= baseline").baseline == "lower"
    assert parse_rule("rcdiag/ess_token >= baseline").baseline == "lower"
    assert parse_rule("rollout_corr/k3_kl.overall < baseline").baseline == "higher"
    assert parse_rule("rollout_corr/k3_kl.overall == baseline").baseline == "either"


@pytest.mark.parametrize(
    ("text", "match"),
    [
        ("", "empty rule"),
        ("rollout_corr/k3_kl.overall", "expected METRIC.AGGREGATION OP LIMIT"),
        ("rollout_corr/k3_kl.overall < 1 < 2", "write a range as LO <= METRIC <= HI"),
        ("rollout_corr/k3_kl.overall = 1", "unknown operator '='"),
        ("rollout_corr/k3_kl.overall != 1", "!= is not supported"),
        ("rollout_corr/k3_kl.overall == 1e-3", "== only compares with the baseline"),
        ("1e-3 > rollout_corr/k3_kl.overall", "put the metric on the left"),
        ("2 <= rollout_corr/k3_kl.overall <= 1", "empty range"),
        ("rollout_corr/k3_kl.overall < abc", "'abc' is not a number"),
        ("rollout_corr/k3_kl.overall < nan", "must be a finite number"),
        ("rollout_corr k3.overall < 1", "is not a metric name"),
        ("rollout_corr/k3_kl.max_step <= baseline", "drop .max_step"),
        ("preset:decoupled_geo_rs/rollout_corr/kl.overall <= baseline", "not preset metrics"),
        ("preset:/rollout_corr/kl < 1", "empty preset name"),
        ("preset:rollout_corr < 1", "expected preset:NAME/metric"),
    ],
)
def test_malformed_rules_are_usage_errors(text: str, match: str) -> None:
    with pytest.raises(UsageError, match=match) as info:
        parse_rule(text, "--rule")
    if text:
        assert repr(" ".join(text.split())) in str(info.value), "the message names the rule"


def test_toml_both_forms_settings_and_defaults() -> None:
    text = """
    rel_tol = 0.2
    confidence = 0.9
    include_defaults = true
    rules = ["rollout_corr/k3_kl.overall < 1e-3", "warn: rcdiag/ess_token.min_step >= 0.3"]

    [[rule]]
    name = "IS weights stay near 1"
    metric = "rollout_corr/rollout_is_mean"
    preset = "decoupled_token_is"
    op = "between"
    value = [0.5, 2.0]
    severity = "warn"
    why = "verl docs"

    [[rule]]
    expr = "rcdiag/abs_log_ratio_mean.overall <= baseline"
    rel_tol = 0.05

    [[rule]]
    metric = "rollout_corr/kl"
    aggregation = "last_step"
    abs = true
    op = "<="
    value = 0.1
    """
    ruleset = parse_rules_toml(text, "rules.toml")
    assert ruleset.settings == {"rel_tol": 0.2, "confidence": 0.9}
    assert ruleset.include_defaults
    k3, ess, is_mean, drift, kl = ruleset.rules
    assert k3.upper == Bound(1e-3, inclusive=False)
    assert ess.severity == "warn" and ess.aggregation == "min_step"
    assert (is_mean.name, is_mean.preset, is_mean.severity) == (
        "IS weights stay near 1",
        "decoupled_token_is",
        "warn",
    )
    assert (is_mean.lower, is_mean.upper, is_mean.why) == (Bound(0.5), Bound(2.0), "verl docs")
    assert drift.baseline == "higher" and drift.rel_tol == 0.05
    assert kl.absolute and kl.aggregation == "last_step" and kl.upper == Bound(0.1)
    assert kl.name == "abs(rollout_corr/kl.last_step) <= 0.1"


@pytest.mark.parametrize(
    ("text", "match"),
    [
        ("rules = [", "rules.toml: not valid TOML"),
        ('rulez = ["x < 1"]', "unknown key 'rulez' \\(did you mean 'rule"),
        ("rules = [1]", "rules must be a list of strings"),
        ("rel_tol = 'x'", "rel_tol must be a number"),
        ("include_defaults = 1", "include_defaults must be true or false"),
        ("", "no rules"),
        ('rules = ["rollout_corr/k3_kl.overall << 1"]', "rules.toml: rule"),
        ("[[rule]]\nmetric = 'a'\nop = '<'\nvaleu = 1", "unknown key 'valeu'"),
        ("[[rule]]\nmetric = 'a'\nop = '<'", "missing value"),
        ("[[rule]]\nmetric = 'a'\nop = '~'\nvalue = 1", "op must be one of"),
        ("[[rule]]\nmetric = 'a'\nop = 'between'\nvalue = 1", "needs value = \\[LO, HI\\]"),
        ("[[rule]]\nexpr = 'a < 1'\nmetric = 'a'", "either expr or metric/op/value"),
        ("[[rule]]\nexpr = 'a < 1'\nseverity = 'error'", "severity must be 'fail' or 'warn'"),
        ("[[rule]]\nmetric = 'a'\nop = '<'\nvalue = 1\naggregation = 'max_stp'", "'max_step'"),
        ("[[rule]]\nexpr = 'a < 1'\nabs_tol = 0.1", "apply only to comparisons with a baseline"),
        ("[[rule]]\nexpr = 'a <= baseline'\nrel_tol = -1", "rel_tol must be a finite number"),
    ],
)
def test_malformed_toml(text: str, match: str) -> None:
    with pytest.raises(UsageError, match=match):
        parse_rules_toml(text, "rules.toml")


@pytest.mark.parametrize(
    ("settings", "match"),
    [
        ({"rel_tol": -0.1}, "--rel-tol must be a finite number ≥ 0"),
        ({"abs_tol": math.inf}, "--abs-tol must be a finite number ≥ 0"),
        ({"confidence": 1.0}, "--confidence must be strictly between 0 and 1"),
        ({"trend_alpha": 0.0}, "--trend-alpha must be strictly between 0 and 1"),
    ],
)
def test_bad_settings(settings: dict[str, float], match: str) -> None:
    with pytest.raises(UsageError, match=match):
        CheckSettings(**settings)


CATALOG = MetricCatalog(
    analysis=NAMES,
    presets={"decoupled_token_is": ["rollout_corr/kl", "rollout_corr/rollout_is_mean"]},
    available_presets=["decoupled_token_is", "decoupled_seq_is", "decoupled_geo_rs"],
)


@pytest.mark.parametrize(
    ("text", "match"),
    [
        (
            "rollout_corr/k3_k.overall < 1",
            "rule 'rollout_corr/k3_k.overall < 1': unknown metric 'rollout_corr/k3_k' in the "
            "analyze results; closest: rollout_corr/k3_kl",
        ),
        ("k3_kl.overall < 1", "closest: rollout_corr/k3_kl"),
        ("rollout_corr/k3_kl.max_stp < 1", "unknown aggregation 'max_stp'; did you mean "),
        ("rollout_corr/rollout_is_mean < 2", "write preset:NAME/rollout_corr/rollout_is_mean"),
        ("preset:decoupled_tok_is/rollout_corr/kl < 1", "closest: decoupled_token_is"),
        ("preset:decoupled_token_is/rollout_corr/k3_kl < 1", "in preset decoupled_token_is"),
        ("rollout_corr/k3_kl.overall <= baseline", "pass --baseline FILE"),
    ],
)
def test_validation_names_the_rule_and_closest_names(text: str, match: str) -> None:
    with pytest.raises(UsageError, match=match.replace("(", "\\(").replace(")", "\\)")):
        validate_rules([parse_rule(text)], CATALOG)


def test_valid_rules_pass_validation() -> None:
    rules = [
        parse_rule("rcdiag/log_ratio_p99.9.max_step < 1"),
        parse_rule("0.5 <= preset:decoupled_token_is/rollout_corr/rollout_is_mean <= 2"),
        parse_rule("rcdiag/ess_seq >= baseline"),
    ]
    validate_rules(rules, MetricCatalog(NAMES, CATALOG.presets, baseline=NAMES))


def test_default_rules_are_the_registry_bands() -> None:
    rules = [r for r in default_rules(NAMES, with_baseline=False) if r.aggregation == "overall"]
    expected = [
        from_band(record, band)
        for record in RECORDS
        if record.name in NAMES
        for band in record.bands
    ]
    assert rules == expected
    for record in RECORDS:
        for band in record.bands:
            rule = from_band(record, band)
            # the CI rule passes exactly where the band is not breached
            for probe in (0.0, 1e-6, 1e-4, 0.05, 0.3, 0.5, 1.0, 1.5, 2.5, -0.2, -3.0):
                judged = abs(probe) if rule.absolute else probe
                assert rule.holds(judged) == (not record.breaches(probe, band)), (rule, probe)
            assert rule.severity == ("fail" if band.status == "act" else "warn")


def test_default_baseline_rules() -> None:
    rules = [r for r in default_rules(NAMES, with_baseline=True, abs_tol=1e-3) if r.baseline]
    assert {r.metric for r in rules} == set(BASELINE_DIRECTIONS)
    floors = {r.metric: r.abs_tol for r in rules}
    assert floors["rcdiag/veto_fraction"] == RARE_EVENT_ABS_TOL["rcdiag/veto_fraction"]
    assert floors["rcdiag/catastrophic_token_fraction"] == 1e-3, "the run's tolerance if larger"
    assert floors["rollout_corr/k3_kl"] is None


def test_docs_describe_every_aggregation_and_setting() -> None:
    rules_doc = (DOCS / "rules.md").read_text()
    for name in [*AGGREGATIONS, "abs_tol", "rel_tol", "confidence", "trend_alpha"]:
        assert f"`{name}`" in rules_doc, name
    for metric in BASELINE_DIRECTIONS:
        assert metric in rules_doc, metric
    ci_doc = (DOCS / "ci.md").read_text()
    assert "rcdiag check" in ci_doc and "--junit" in ci_doc and "GITHUB_STEP_SUMMARY" in ci_doc
