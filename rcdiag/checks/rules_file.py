"""Rules files: the ``[[rules]]`` tables and settings of a TOML file (docs/rules.md, "Rules files").
Every problem is a :class:`~rcdiag.errors.UsageError` naming the file and the table."""

from __future__ import annotations

import difflib
import sys
from collections.abc import Mapping, Sequence
from dataclasses import replace
from typing import Any

from rcdiag.checks.rules import (
    AGGREGATIONS,
    SETTING_NAMES,
    SEVERITIES,
    Rule,
    RuleSet,
    parse_rule,
)
from rcdiag.errors import UsageError
from rcdiag.io.documents import refuse_nonfinite

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
    except RecursionError:
        raise UsageError(f"{origin}: not a rules file (TOML nested too deeply)") from None
    refuse_nonfinite(document, origin)
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
