"""Rules against the metrics a run produces: unknown names are refused with the closest ones
(docs/rules.md)."""

from __future__ import annotations

import difflib
from collections.abc import Collection, Mapping, Sequence
from dataclasses import dataclass, field

from rcdiag.checks.rules import AGGREGATIONS, Rule
from rcdiag.errors import UsageError


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
        >>> names = ["rollout_corr/ppl_ratio", "rollout_corr/log_ppl_diff", "rcdiag/ess_seq"]
        >>> closest("ppl_ratio", names), closest("rollout_corr/pplratio", names)
        (['rollout_corr/ppl_ratio'], ['rollout_corr/ppl_ratio', 'rollout_corr/log_ppl_diff'])
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
