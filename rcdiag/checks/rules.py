"""CI rules as data: one frozen :class:`Rule` per gate, parsed from a compact expression or TOML.

Grammar of the compact form (docs/rules.md has the full reference)::

    rule     := [severity ":"] operand op limit
              | [severity ":"] number lt operand lt number     (a range, e.g. 0.5 <= x <= 2)
    severity := "fail" | "warn"
    operand  := target ["." aggregation] | "abs(" target ["." aggregation] ")"
    target   := metric | "preset:" NAME "/" metric
    op       := "<" | "<=" | ">" | ">=" | "=="        ("==" only with the limit "baseline")
    lt       := "<" | "<="
    limit    := number | "baseline"

A metric's name may itself contain dots (``rcdiag/log_ratio_p99.9``); the text after the last dot is
the aggregation only when it is one of :data:`AGGREGATIONS`, else the aggregation is ``overall``.
Parsing checks the syntax only; :func:`~rcdiag.checks.validation.validate_rules` checks the names
against the metrics a run actually produces (rules files: :mod:`rcdiag.checks.rules_file`). Every
problem is a :class:`~rcdiag.errors.UsageError` naming the rule.
"""

from __future__ import annotations

import math
import re
from collections.abc import Mapping
from dataclasses import dataclass, field
from typing import Any, Literal, get_args

from rcdiag.errors import UsageError

Aggregation = Literal[
    "overall", "mean_step", "max_step", "min_step", "last_step", "slope", "rise", "fall"
]
AGGREGATIONS: dict[str, str] = {
    "overall": "the whole dump as one batch (what `rcdiag analyze` prints as overall)",
    "mean_step": "mean of the per-step values (steps with a null value skipped)",
    "max_step": "largest per-step value",
    "min_step": "smallest per-step value",
    "last_step": "value of the last step that has one",
    "slope": "least-squares slope of the per-step values against the step number (per step)",
    "rise": "relative size of a significant sustained rise over steps (0 when none; see trend)",
    "fall": "relative size of a significant sustained fall over steps (0 when none)",
}
"""How a rule reduces a metric to one number."""


Severity = Literal["fail", "warn"]
SEVERITIES: tuple[str, ...] = get_args(Severity)

Direction = Literal["higher", "lower", "either"]
"""Which change against a baseline is a regression: ``x <= baseline`` fails when x is significantly
higher, ``x >= baseline`` when lower, ``x == baseline`` either way."""

_BASELINE_OPS: dict[str, Direction] = {
    "<": "higher",
    "<=": "higher",
    ">": "lower",
    ">=": "lower",
    "==": "either",
}
_DIRECTION_OPS: dict[Direction, str] = {"higher": "<=", "lower": ">=", "either": "=="}
_OPERATOR = re.compile(r"\s*(<=|>=|==|!=|=<|=>|<|>|=)\s*")
_NAME = re.compile(r"[A-Za-z0-9_.\-/]+")


@dataclass(frozen=True)
class Bound:
    """One side of an allowed interval: ``value`` and whether the value itself is allowed."""

    value: float
    inclusive: bool = True


@dataclass(frozen=True)
class Rule:
    """A CI gate: ``aggregation(metric)`` must stay within bounds, or not drift from a baseline.

    Args:
        metric: a metric name as the JSON documents spell it (``rollout_corr/k3_kl``).
        aggregation: one of :data:`AGGREGATIONS`.
        lower, upper: the allowed interval (either may be absent); unused with ``baseline``.
        baseline: compare with the baseline instead of fixed bounds; which change is a regression.
        preset: read the metric from this preset's (or ``--config`` file's) results.
        absolute: apply ``abs`` to the aggregated value (and to bootstrap replicates).
        severity: ``fail`` fails the run (exit 1); ``warn`` is reported only.
        name: shown in every output; defaults to :attr:`expression`.
        why: why the limit is what it is (shown with failures).
        abs_tol, rel_tol: per-rule tolerances of a baseline comparison (None: the run's settings).
    """

    metric: str
    aggregation: Aggregation = "overall"
    lower: Bound | None = None
    upper: Bound | None = None
    baseline: Direction | None = None
    preset: str | None = None
    absolute: bool = False
    severity: Severity = "fail"
    name: str = ""
    why: str = ""
    abs_tol: float | None = None
    rel_tol: float | None = None

    def __post_init__(self) -> None:
        if self.baseline is None and self.lower is None and self.upper is None:
            raise ValueError("a rule needs a bound or a baseline comparison")
        if not self.name:
            object.__setattr__(self, "name", self.expression)

    @property
    def target(self) -> str:
        """The metric with its ``preset:NAME/`` prefix, if any."""
        return f"preset:{self.preset}/{self.metric}" if self.preset else self.metric

    @property
    def operand(self) -> str:
        text = f"{self.target}.{self.aggregation}"
        return f"abs({text})" if self.absolute else text

    @property
    def limit(self) -> str:
        """The allowed region as text: ``<= 0.001``, ``in [0.5, 2]``, ``<= baseline``."""
        if self.baseline is not None:
            return f"{_DIRECTION_OPS[self.baseline]} baseline"
        if self.lower is not None and self.upper is not None:
            left = "[" if self.lower.inclusive else "("
            right = "]" if self.upper.inclusive else ")"
            return f"in {left}{_num(self.lower.value)}, {_num(self.upper.value)}{right}"
        if self.upper is not None:
            return f"{'<=' if self.upper.inclusive else '<'} {_num(self.upper.value)}"
        assert self.lower is not None
        return f"{'>=' if self.lower.inclusive else '>'} {_num(self.lower.value)}"

    @property
    def expression(self) -> str:
        """The rule in the compact grammar (canonical spelling)."""
        if self.baseline is None and self.lower is not None and self.upper is not None:
            lo = "<=" if self.lower.inclusive else "<"
            hi = "<=" if self.upper.inclusive else "<"
            text = f"{_num(self.lower.value)} {lo} {self.operand} {hi} {_num(self.upper.value)}"
        else:
            text = f"{self.operand} {self.limit}"
        return text if self.severity == "fail" else f"{self.severity}: {text}"

    def holds(self, value: float) -> bool:
        """Whether ``value`` (already aggregated and, for ``absolute``, made absolute) is allowed."""
        if math.isnan(value):
            return False
        if self.lower is not None and not (
            value >= self.lower.value if self.lower.inclusive else value > self.lower.value
        ):
            return False
        return self.upper is None or (
            value <= self.upper.value if self.upper.inclusive else value < self.upper.value
        )


def _num(value: float) -> str:
    """A float as short as it reads back exactly (``0.001``, ``2``, ``1e-05``)."""
    text = repr(float(value))
    return text[:-2] if text.endswith(".0") else text


@dataclass(frozen=True)
class CheckSettings:
    """How baseline comparisons and trend tests decide.

    Args:
        abs_tol: absolute tolerance τ_abs of a baseline comparison.
        rel_tol: relative tolerance τ_rel (times |baseline value|); the tolerance is
            τ = max(τ_abs, τ_rel · |b|).
        confidence: level of the central bootstrap interval of (current − baseline).
        trend_alpha: significance level of the change-point test behind ``rise`` and ``fall``.
    """

    abs_tol: float = 0.0
    rel_tol: float = 0.1
    confidence: float = 0.99
    trend_alpha: float = 0.05

    def __post_init__(self) -> None:
        for name in ("abs_tol", "rel_tol"):
            value = getattr(self, name)
            if not (math.isfinite(value) and value >= 0):
                raise UsageError(f"{setting_flag(name)} must be a finite number ≥ 0, got {value!r}")
        for name in ("confidence", "trend_alpha"):
            value = getattr(self, name)
            if not 0 < value < 1:
                raise UsageError(
                    f"{setting_flag(name)} must be strictly between 0 and 1, got {value!r}"
                )


SETTING_NAMES: tuple[str, ...] = ("abs_tol", "rel_tol", "confidence", "trend_alpha")


def setting_flag(name: str) -> str:
    return "--" + name.replace("_", "-")


@dataclass(frozen=True)
class RuleSet:
    """What a rules file (or the command line) asks for."""

    rules: tuple[Rule, ...] = ()
    settings: Mapping[str, float] = field(default_factory=dict)
    """Settings given in the file (the command line overrides them)."""
    include_defaults: bool = False


def located(origin: str | None, text: str) -> str:
    prefix = f"{origin}: " if origin else ""
    return f"{prefix}rule {text!r}"


def parse_number(text: str, rule: str, origin: str | None) -> float:
    try:
        value = float(text)
    except ValueError:
        raise UsageError(
            f"{located(origin, rule)}: {text!r} is not a number (expected e.g. 1e-3 or 0.1)"
        ) from None
    if not math.isfinite(value):
        raise UsageError(f"{located(origin, rule)}: the limit must be a finite number, got {text}")
    return value


def _looks_numeric(text: str) -> bool:
    try:
        float(text)
    except ValueError:
        return False
    return True


def _operand(text: str, rule: str, origin: str | None) -> dict[str, Any]:
    """``[abs(]target[.aggregation][)]`` → metric, preset, aggregation, absolute."""
    absolute = False
    inner = re.fullmatch(r"abs\s*\((.*)\)", text)
    if inner:
        absolute, text = True, inner[1].strip()
    preset = None
    prefixed = re.fullmatch(r"preset:([^/\s]*)/(.*)", text)
    if prefixed:
        preset, text = prefixed[1], prefixed[2]
        if not preset:
            raise UsageError(
                f"{located(origin, rule)}: empty preset name (expected preset:NAME/metric)"
            )
    elif text.startswith("preset:"):
        raise UsageError(f"{located(origin, rule)}: expected preset:NAME/metric, got {text!r}")
    aggregation = "overall"
    head, dot, tail = text.rpartition(".")
    if dot and tail in AGGREGATIONS:
        text, aggregation = head, tail
    if not text or not _NAME.fullmatch(text):
        raise UsageError(
            f"{located(origin, rule)}: {text!r} is not a metric name "
            "(expected e.g. rollout_corr/k3_kl.overall)"
        )
    return {"metric": text, "preset": preset, "aggregation": aggregation, "absolute": absolute}


def parse_rule(text: str, origin: str | None = None, **extra: Any) -> Rule:
    """A rule from the compact grammar (module docstring).

    Args:
        text: e.g. ``"rollout_corr/k3_kl.overall < 1e-3"``.
        origin: where the text comes from (a file name, ``--rule``), for error messages.
        extra: further :class:`Rule` fields (``name``, ``why``, tolerances).

    Raises:
        UsageError: the text does not follow the grammar.

    Example:
        >>> rule = parse_rule("warn: 0.5 <= preset:decoupled_token_is/rollout_corr/rollout_is_mean <= 2")
        >>> rule.preset, rule.aggregation, rule.severity, rule.limit
        ('decoupled_token_is', 'overall', 'warn', 'in [0.5, 2]')
        >>> parse_rule("rollout_corr/k3_kl.max_step < 1e-3").holds(2e-3)
        False
    """
    source = " ".join(text.split())
    if not source:
        raise UsageError(f"{origin + ': ' if origin else ''}empty rule")
    body = source
    severity: Severity = "fail"
    prefix = re.match(r"(fail|warn)\s*:\s*", body)
    if prefix:
        severity = prefix[1]  # type: ignore[assignment]
        body = body[prefix.end() :]
    parts = _OPERATOR.split(body)
    ops = parts[1::2]
    for op in ops:
        if op in ("=", "=<", "=>"):
            raise UsageError(
                f"{located(origin, source)}: unknown operator {op!r}; use <, <=, >, >="
            )
        if op == "!=":
            raise UsageError(f"{located(origin, source)}: != is not supported; use <, <=, >, >=")
    fields: dict[str, Any] = {"severity": severity, "name": source, **extra}
    if len(parts) == 3:
        left, op, right = parts
        if _looks_numeric(left) and not _looks_numeric(right):
            raise UsageError(
                f"{located(origin, source)}: put the metric on the left "
                f"(e.g. {right} {_mirror(op)} {left})"
            )
        fields |= _operand(left, source, origin)
        if right == "baseline":
            fields["baseline"] = _BASELINE_OPS[op]
        elif op == "==":
            raise UsageError(
                f"{located(origin, source)}: == only compares with the baseline (floats are never "
                "exactly equal); use <=, >= or a range LO <= METRIC <= HI"
            )
        else:
            value = parse_number(right, source, origin)
            inclusive = op in ("<=", ">=")
            key = "upper" if op in ("<", "<=") else "lower"
            fields[key] = Bound(value, inclusive)
    elif len(parts) == 5:
        low, op1, middle, op2, high = parts
        if op1 not in ("<", "<=") or op2 not in ("<", "<=") or not _looks_numeric(low):
            raise UsageError(
                f"{located(origin, source)}: write a range as LO <= METRIC <= HI (with < or <=)"
            )
        fields |= _operand(middle, source, origin)
        lo, hi = parse_number(low, source, origin), parse_number(high, source, origin)
        if lo > hi:
            raise UsageError(f"{located(origin, source)}: empty range ({low} > {high})")
        fields["lower"] = Bound(lo, op1 == "<=")
        fields["upper"] = Bound(hi, op2 == "<=")
    else:
        raise UsageError(
            f"{located(origin, source)}: expected METRIC.AGGREGATION OP LIMIT "
            "(e.g. rollout_corr/k3_kl.overall < 1e-3) or LO <= METRIC.AGGREGATION <= HI"
        )
    return checked_rule(Rule(**fields), source, origin)


def _mirror(op: str) -> str:
    return {"<": ">", "<=": ">=", ">": "<", ">=": "<=", "==": "=="}[op]


def checked_rule(rule: Rule, text: str, origin: str | None) -> Rule:
    """Combinations the grammar allows but the semantics do not."""
    where = located(origin, text)
    if rule.baseline is not None:
        if rule.aggregation != "overall":
            raise UsageError(
                f"{where}: a baseline comparison uses the overall value; drop .{rule.aggregation}"
            )
        if rule.preset is not None:
            raise UsageError(
                f"{where}: baseline comparisons cover the analyze metrics, not preset metrics"
            )
    elif rule.abs_tol is not None or rule.rel_tol is not None:
        raise UsageError(f"{where}: abs_tol and rel_tol apply only to comparisons with a baseline")
    for name in ("abs_tol", "rel_tol"):
        value = getattr(rule, name)
        if value is not None and not (math.isfinite(value) and value >= 0):
            raise UsageError(f"{where}: {name} must be a finite number ≥ 0, got {value!r}")
    return rule
