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
Parsing checks the syntax only; :func:`validate_rules` checks the names against the metrics a run
actually produces. Every problem is a :class:`~rcdiag.errors.UsageError` naming the rule.
"""

from __future__ import annotations

import difflib
import math
import re
import sys
from collections.abc import Collection, Mapping, Sequence
from dataclasses import dataclass, field, replace
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
                raise UsageError(f"{_flag(name)} must be a finite number ≥ 0, got {value!r}")
        for name in ("confidence", "trend_alpha"):
            value = getattr(self, name)
            if not 0 < value < 1:
                raise UsageError(f"{_flag(name)} must be strictly between 0 and 1, got {value!r}")


SETTING_NAMES: tuple[str, ...] = ("abs_tol", "rel_tol", "confidence", "trend_alpha")


def _flag(name: str) -> str:
    return "--" + name.replace("_", "-")


@dataclass(frozen=True)
class RuleSet:
    """What a rules file (or the command line) asks for."""

    rules: tuple[Rule, ...] = ()
    settings: Mapping[str, float] = field(default_factory=dict)
    """Settings given in the file (the command line overrides them)."""
    include_defaults: bool = False


def _where(origin: str | None, text: str) -> str:
    prefix = f"{origin}: " if origin else ""
    return f"{prefix}rule {text!r}"


def _number(text: str, rule: str, origin: str | None) -> float:
    try:
        value = float(text)
    except ValueError:
        raise UsageError(
            f"{_where(origin, rule)}: {text!r} is not a number (expected e.g. 1e-3 or 0.1)"
        ) from None
    if not math.isfinite(value):
        raise UsageError(f"{_where(origin, rule)}: the limit must be a finite number, got {text}")
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
                f"{_where(origin, rule)}: empty preset name (expected preset:NAME/metric)"
            )
    elif text.startswith("preset:"):
        raise UsageError(f"{_where(origin, rule)}: expected preset:NAME/metric, got {text!r}")
    aggregation = "overall"
    head, dot, tail = text.rpartition(".")
    if dot and tail in AGGREGATIONS:
        text, aggregation = head, tail
    if not text or not _NAME.fullmatch(text):
        raise UsageError(
            f"{_where(origin, rule)}: {text!r} is not a metric name "
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
            raise UsageError(f"{_where(origin, source)}: unknown operator {op!r}; use <, <=, >, >=")
        if op == "!=":
            raise UsageError(f"{_where(origin, source)}: != is not supported; use <, <=, >, >=")
    fields: dict[str, Any] = {"severity": severity, "name": source, **extra}
    if len(parts) == 3:
        left, op, right = parts
        if _looks_numeric(left) and not _looks_numeric(right):
            raise UsageError(
                f"{_where(origin, source)}: put the metric on the left "
                f"(e.g. {right} {_mirror(op)} {left})"
            )
        fields |= _operand(left, source, origin)
        if right == "baseline":
            fields["baseline"] = _BASELINE_OPS[op]
        elif op == "==":
            raise UsageError(
                f"{_where(origin, source)}: == only compares with the baseline (floats are never "
                "exactly equal); use <=, >= or a range LO <= METRIC <= HI"
            )
        else:
            value = _number(right, source, origin)
            inclusive = op in ("<=", ">=")
            key = "upper" if op in ("<", "<=") else "lower"
            fields[key] = Bound(value, inclusive)
    elif len(parts) == 5:
        low, op1, middle, op2, high = parts
        if op1 not in ("<", "<=") or op2 not in ("<", "<=") or not _looks_numeric(low):
            raise UsageError(
                f"{_where(origin, source)}: write a range as LO <= METRIC <= HI (with < or <=)"
            )
        fields |= _operand(middle, source, origin)
        lo, hi = _number(low, source, origin), _number(high, source, origin)
        if lo > hi:
            raise UsageError(f"{_where(origin, source)}: empty range ({low} > {high})")
        fields["lower"] = Bound(lo, op1 == "<=")
        fields["upper"] = Bound(hi, op2 == "<=")
    else:
        raise UsageError(
            f"{_where(origin, source)}: expected METRIC.AGGREGATION OP LIMIT "
            "(e.g. rollout_corr/k3_kl.overall < 1e-3) or LO <= METRIC.AGGREGATION <= HI"
        )
    return _checked(Rule(**fields), source, origin)


def _mirror(op: str) -> str:
    return {"<": ">", "<=": ">=", ">": "<", ">=": "<=", "==": "=="}[op]


def _checked(rule: Rule, text: str, origin: str | None) -> Rule:
    """Combinations the grammar allows but the semantics do not."""
    where = _where(origin, text)
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


_TABLE_KEYS = (
    "name",
    "expr",
    "metric",
    "preset",
    "aggregation",
    "op",
    "value",
    "abs",
    "severity",
    "why",
    "abs_tol",
    "rel_tol",
)
_TOP_KEYS = ("rules", "rule", "include_defaults", *SETTING_NAMES)
_TABLE_OPS = ("<", "<=", ">", ">=", "==", "between")


def _unknown_key(key: str, allowed: Sequence[str], where: str) -> UsageError:
    close = difflib.get_close_matches(key, allowed, n=1)
    hint = f" (did you mean {close[0]!r}?)" if close else ""
    return UsageError(f"{where}: unknown key {key!r}{hint}; allowed: {', '.join(allowed)}")


def _table_rule(table: Mapping[str, Any], index: int, origin: str) -> Rule:
    where = f"{origin}: [[rule]] #{index}"
    for key in table:
        if key not in _TABLE_KEYS:
            raise _unknown_key(key, _TABLE_KEYS, where)
    extra: dict[str, Any] = {}
    for key in ("name", "why"):
        if key in table:
            if not isinstance(table[key], str):
                raise UsageError(f"{where}: {key} must be a string")
            extra[key] = table[key]
    for key in ("abs_tol", "rel_tol"):
        if key in table:
            value = table[key]
            if isinstance(value, bool) or not isinstance(value, (int, float)):
                raise UsageError(f"{where}: {key} must be a number")
            extra[key] = float(value)
    severity = table.get("severity", "fail")
    if severity not in SEVERITIES:
        raise UsageError(f"{where}: severity must be 'fail' or 'warn', got {severity!r}")
    if "expr" in table:
        clash = [k for k in ("metric", "preset", "aggregation", "op", "value", "abs") if k in table]
        if clash:
            raise UsageError(f"{where}: give either expr or metric/op/value, not both ({clash[0]})")
        if not isinstance(table["expr"], str):
            raise UsageError(f"{where}: expr must be a string")
        rule = parse_rule(table["expr"], origin, **extra)
        if "severity" in table:
            rule = replace(rule, severity=severity)
        return rule
    missing = [k for k in ("metric", "op", "value") if k not in table]
    if missing:
        raise UsageError(f'{where}: missing {", ".join(missing)} (or give expr = "…")')
    metric, op, value = table["metric"], table["op"], table["value"]
    if not isinstance(metric, str):
        raise UsageError(f"{where}: metric must be a string")
    if op not in _TABLE_OPS:
        raise UsageError(f"{where}: op must be one of {', '.join(_TABLE_OPS)}, got {op!r}")
    aggregation = table.get("aggregation", "overall")
    if aggregation not in AGGREGATIONS:
        close = difflib.get_close_matches(str(aggregation), AGGREGATIONS, n=1)
        hint = f" (did you mean {close[0]!r}?)" if close else ""
        raise UsageError(
            f"{where}: unknown aggregation {aggregation!r}{hint}; "
            f"expected one of {', '.join(AGGREGATIONS)}"
        )
    target = metric if "preset" not in table else f"preset:{table['preset']}/{metric}"
    operand = f"{target}.{aggregation}"
    if table.get("abs", False) is True:
        operand = f"abs({operand})"
    elif "abs" in table and table["abs"] is not False:
        raise UsageError(f"{where}: abs must be true or false")
    if op == "between":
        if not (isinstance(value, list) and len(value) == 2):
            raise UsageError(f'{where}: op = "between" needs value = [LO, HI]')
        text = f"{value[0]} <= {operand} <= {value[1]}"
    else:
        if isinstance(value, bool) or not isinstance(value, (int, float, str)):
            raise UsageError(f'{where}: value must be a number or "baseline"')
        text = f"{operand} {op} {value}"
    extra.setdefault("name", text if severity == "fail" else f"{severity}: {text}")
    return replace(parse_rule(text, origin, **extra), severity=severity)


def parse_rules_toml(text: str, origin: str) -> RuleSet:
    """A rules file (TOML; schema in docs/rules.md).

    Raises:
        UsageError: not valid TOML, an unknown key, a malformed rule or setting.

    Example:
        >>> rs = parse_rules_toml('rel_tol = 0.2\\nrules = ["rcdiag/ess_token.min_step >= 0.3"]', "r.toml")
        >>> rs.settings, rs.rules[0].lower
        ({'rel_tol': 0.2}, Bound(value=0.3, inclusive=True))
    """
    if sys.version_info >= (3, 11):
        import tomllib
    else:  # pragma: no cover - Python 3.10
        try:
            import tomli as tomllib
        except ModuleNotFoundError:
            raise UsageError(
                f"{origin}: reading TOML on Python 3.10 needs the tomli package (pip install tomli)"
            ) from None
    try:
        document = tomllib.loads(text)
    except tomllib.TOMLDecodeError as exc:
        raise UsageError(f"{origin}: not valid TOML ({exc})") from None
    for key in document:
        if key not in _TOP_KEYS:
            raise _unknown_key(key, _TOP_KEYS, origin)
    settings: dict[str, float] = {}
    for key in SETTING_NAMES:
        if key in document:
            value = document[key]
            if isinstance(value, bool) or not isinstance(value, (int, float)):
                raise UsageError(f"{origin}: {key} must be a number, got {value!r}")
            settings[key] = float(value)
    include = document.get("include_defaults", False)
    if not isinstance(include, bool):
        raise UsageError(f"{origin}: include_defaults must be true or false")
    compact = document.get("rules", [])
    if not isinstance(compact, list) or not all(isinstance(r, str) for r in compact):
        raise UsageError(f'{origin}: rules must be a list of strings, e.g. rules = ["… < 1e-3"]')
    tables = document.get("rule", [])
    if not isinstance(tables, list) or not all(isinstance(t, dict) for t in tables):
        raise UsageError(f"{origin}: rule must be an array of tables ([[rule]])")
    rules = [parse_rule(r, origin) for r in compact]
    rules += [_table_rule(t, i + 1, origin) for i, t in enumerate(tables)]
    if not rules and not include:
        raise UsageError(
            f'{origin}: no rules (add rules = ["…"], [[rule]] tables or include_defaults = true)'
        )
    return RuleSet(tuple(rules), settings, include)


@dataclass(frozen=True)
class MetricCatalog:
    """The metric names a run produces, against which rules are validated.

    Args:
        analysis: names of the analyze document's ``overall``.
        presets: for each configuration a rule may name, the names of its ``overall``.
        available_presets: every configuration name that could be asked for (for suggestions).
        baseline: names the baseline holds, when a baseline is given.
    """

    analysis: Collection[str]
    presets: Mapping[str, Collection[str]] = field(default_factory=dict)
    available_presets: Collection[str] = ()
    baseline: Collection[str] | None = None


def closest(name: str, candidates: Collection[str], n: int = 3) -> list[str]:
    """Up to ``n`` candidates that look like ``name``: same last path part first, then difflib.

    Example:
        >>> names = ["rollout_corr/kl", "rollout_corr/k3_kl", "rcdiag/ess_token"]
        >>> closest("k3_kl", names), closest("rollout_corr/k3kl", names)
        (['rollout_corr/k3_kl'], ['rollout_corr/k3_kl', 'rollout_corr/kl'])
    """
    tail = name.rsplit("/", 1)[-1]
    same_tail = [c for c in candidates if c.rsplit("/", 1)[-1] == tail and c != name]
    fuzzy = difflib.get_close_matches(name, list(candidates), n=n, cutoff=0.5)
    fuzzy_tail = difflib.get_close_matches(
        tail, [c.rsplit("/", 1)[-1] for c in candidates], n=n, cutoff=0.6
    )
    by_tail = [c for t in fuzzy_tail for c in candidates if c.rsplit("/", 1)[-1] == t]
    found: list[str] = []
    for c in [*same_tail, *fuzzy, *by_tail]:
        if c not in found:
            found.append(c)
    return found[:n]


def _unknown_metric(rule: Rule, names: Collection[str], where: str) -> UsageError:
    head, dot, tail = rule.metric.rpartition(".")
    if dot and head in names and tail not in AGGREGATIONS:
        close = difflib.get_close_matches(tail, AGGREGATIONS, n=1)
        hint = f"; did you mean {head}.{close[0]}?" if close else ""
        return UsageError(
            f"rule {rule.name!r}: unknown aggregation {tail!r}{hint} "
            f"(expected one of {', '.join(AGGREGATIONS)})"
        )
    suggestions = closest(rule.metric, names)
    hint = f"; closest: {', '.join(suggestions)}" if suggestions else ""
    if rule.preset is None and rule.metric.startswith(
        ("rollout_corr/rollout_is", "rollout_corr/rollout_rs")
    ):
        hint += (
            f"; IS and RS metrics exist only for a configuration: write preset:NAME/{rule.metric}"
        )
    return UsageError(f"rule {rule.name!r}: unknown metric {rule.metric!r} in {where}{hint}")


def validate_rules(rules: Sequence[Rule], catalog: MetricCatalog) -> None:
    """Check every rule's preset and metric against what the run produces.

    Raises:
        UsageError: naming the rule and the closest valid names.
    """
    for rule in rules:
        if rule.preset is None:
            names, where = catalog.analysis, "the analyze results"
        else:
            if rule.preset not in catalog.presets:
                suggestions = closest(rule.preset, catalog.available_presets)
                hint = f"; closest: {', '.join(suggestions)}" if suggestions else ""
                raise UsageError(
                    f"rule {rule.name!r}: unknown preset {rule.preset!r}{hint} "
                    "(`rcdiag presets` lists them; --config FILE adds one named after the file)"
                )
            names, where = catalog.presets[rule.preset], f"preset {rule.preset}"
        if rule.metric not in names:
            raise _unknown_metric(rule, names, where)
        if rule.baseline is not None:
            if catalog.baseline is None:
                raise UsageError(
                    f"rule {rule.name!r} compares with a baseline: pass --baseline FILE "
                    "(made by `rcdiag baseline`)"
                )
            if rule.metric not in catalog.baseline:
                raise UsageError(f"rule {rule.name!r}: the baseline holds no {rule.metric!r}")


def referenced_presets(rules: Sequence[Rule]) -> list[str]:
    """The configuration names the rules read, in first-use order."""
    seen: list[str] = []
    for rule in rules:
        if rule.preset is not None and rule.preset not in seen:
            seen.append(rule.preset)
    return seen
