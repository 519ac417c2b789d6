"""A result as a notebook card: what :mod:`rcdiag.report.notebook` draws, gathered from the typed
result only (its verdict, gauges, key metrics, causes, per-step trends, a table, the advice).

Nothing is decided here: the verdict of a result that holds none (an analysis, a comparison) is
:func:`rcdiag.assess.verdict.signals.verdict` of its document, as the report computes it; the
gauges, key-metric cards and causes are laid out by the report's own view
(:mod:`rcdiag.report.view`).
"""

from __future__ import annotations

import os
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any

from rcdiag.assess.wording import STATUS_WORDS
from rcdiag.formatting import count, pct, short
from rcdiag.metrics.records import ABS_LOG_RATIO_MEAN, CHI2_SEQ, ESS_SEQ, K3_KL, REGISTRY
from rcdiag.model import (
    AnalysisResult,
    Baseline,
    CheckResult,
    ComparisonResult,
    Diagnosis,
    Recommendation,
    ReportDocument,
    SourceInfo,
    StepResult,
)
from rcdiag.report.texts import SUMMARY_COLUMNS
from rcdiag.report.view import cause_views, gauge_view, key_metric_cards, summary_cells

TREND_METRICS = tuple(r.name for r in (K3_KL, ABS_LOG_RATIO_MEAN, ESS_SEQ, CHI2_SEQ))
"""The per-step curves a card draws, when the result has them (the report's trend metrics)."""
TABLE_ROWS = 12
"""The most rows a card's table shows (the rest are counted)."""


@dataclass(frozen=True)
class Trend:
    """One small per-step chart: a metric's label and its values by step (None: not defined)."""

    label: str
    steps: tuple[int, ...]
    values: tuple[float | None, ...]
    share: bool


@dataclass(frozen=True)
class Table:
    """A small table: column labels, rows of cells (text), and how many rows were left out."""

    title: str
    columns: tuple[str, ...]
    rows: tuple[tuple[str, ...], ...]
    more: int = 0


@dataclass(frozen=True)
class Card:
    """Everything a result's notebook card shows (every string is the user's or rcdiag's text,
    to be escaped by whoever draws it)."""

    kind: str
    source: str
    facts: tuple[str, ...]
    status: str | None = None
    headline: str = ""
    blurb: str = ""
    gauges: tuple[Mapping[str, Any], ...] = ()
    metrics: tuple[Mapping[str, Any], ...] = ()
    causes: tuple[Mapping[str, Any], ...] = ()
    trends: tuple[Trend, ...] = ()
    tables: tuple[Table, ...] = ()
    advice: Mapping[str, str] | None = None
    notes: tuple[str, ...] = field(default_factory=tuple)

    @property
    def word(self) -> str:
        """The verdict's word (``Act``), or ``No verdict``."""
        return STATUS_WORDS.get(str(self.status), "No verdict")


def card(result: Any) -> Card:
    """The card of a top-level result (module docstring).

    Raises:
        TypeError: not a result rcdiag returns.
    """
    for kind, build in _BUILDERS:
        if isinstance(result, kind):
            return build(result)
    raise TypeError(f"no notebook card for {type(result).__name__}")


def _source_name(source: SourceInfo) -> str:
    """The dump as one name: its file, or the directory its files share."""
    paths = source.paths
    if len(paths) <= 1:
        return paths[0] if paths else "–"
    try:
        return os.path.commonpath(paths)
    except ValueError:  # URLs and relative paths mixed
        return f"{paths[0]} and {len(paths) - 1} more files"


def _facts(dialect: str, source: SourceInfo) -> tuple[str, ...]:
    return (
        f"{dialect} dialect",
        f"{count(source.steps)} steps",
        f"{count(source.rows)} rows",
        f"{count(source.valid_tokens)} valid tokens",
        f"{len(source.paths)} files",
    )


def _trends(steps: Sequence[StepResult] | None) -> tuple[Trend, ...]:
    if not steps or len(steps) < 2:
        return ()
    trends = []
    for metric in TREND_METRICS:
        values = tuple(s.metrics.get(metric) for s in steps)
        if all(v is None for v in values):
            continue
        record = REGISTRY.get(metric)
        trends.append(
            Trend(
                label=record.label if record else metric,
                steps=tuple(s.step for s in steps),
                values=values,
                share=bool(record and record.share),
            )
        )
    return tuple(trends)


def _judged(document: ReportDocument) -> dict[str, Any]:
    """The verdict, gauges, key metrics and causes of a document with overall metrics (a document
    read from a file written before results carried their verdict shows its diagnosis' status)."""
    data = document.to_json()
    read = {
        "metrics": tuple(key_metric_cards(data)),
        "causes": tuple(cause_views(data)),
        "trends": _trends(document.step_results),
    }
    decided = document.verdict
    if decided is None:
        return {
            **read,
            "status": None if document.diagnosis is None else document.diagnosis.verdict,
        }
    return {
        **read,
        "status": decided.status,
        "headline": decided.headline,
        "blurb": decided.blurb,
        "gauges": tuple(gauge_view(g.to_json()) for g in decided.deciding),
    }


def _advice(recommendation: Recommendation | None) -> dict[str, str] | None:
    if recommendation is None:
        return None
    chosen = recommendation.recommended
    if chosen is None:
        reason = (
            f"fix the dump first (dump bug {recommendation.dump_bug})"
            if recommendation.dump_bug
            else "no configuration is recommended"
        )
        return {"name": "–", "title": reason, "overrides": ""}
    advice = {"name": chosen.name, "title": chosen.title, "overrides": chosen.overrides}
    if recommendation.framework is not None:
        advice["framework"] = str(recommendation.framework.get("title", ""))
        advice["snippet"] = str(recommendation.framework.get("snippet", ""))
    return advice


def _configurations(presets: Sequence[Any], title: str) -> Table:
    rows = tuple((p.name, *summary_cells(p.summary)) for p in presets[:TABLE_ROWS])
    columns = ("configuration", *(label for _, label in SUMMARY_COLUMNS))
    return Table(title, columns, rows, max(0, len(presets) - TABLE_ROWS))


def _analysis_card(result: AnalysisResult) -> Card:
    judged = _judged(ReportDocument.of(result))
    return Card(
        "rcdiag analyze",
        _source_name(result.source),
        _facts(result.dialect, result.source),
        **judged,
    )


def _report_card(document: ReportDocument) -> Card:
    judged: dict[str, Any] = {}
    if document.overall is not None:
        judged = _judged(document)
    tables = () if not document.presets else (_configurations(document.presets, "Presets"),)
    return Card(
        "rcdiag report",
        _source_name(document.source),
        _facts(document.dialect, document.source),
        tables=tables,
        advice=_advice(document.recommendation),
        **judged,
    )


def _diagnosis_only(diagnosis: Diagnosis | None) -> dict[str, Any]:
    if diagnosis is None:
        return {}
    data = {"diagnosis": diagnosis.to_json()}
    return {"status": diagnosis.verdict, "causes": tuple(cause_views(data))}


def _comparison_card(result: ComparisonResult) -> Card:
    return Card(
        "rcdiag compare-presets",
        _source_name(result.source),
        _facts(result.dialect, result.source),
        tables=(_configurations(result.presets, "Configurations"),),
        advice=_advice(result.recommendation),
        **_diagnosis_only(result.diagnosis),
    )


def _check_card(result: CheckResult) -> Card:
    document = result.document
    rules = list(document.get("rules") or [])
    rows = tuple(
        (
            str(r.get("name", "")),
            str(r.get("status", "")),
            short(r.get("value"), 3) if isinstance(r.get("value"), (int, float)) else "–",
            str(r.get("detail") or ""),
        )
        for r in rules[:TABLE_ROWS]
    )
    table = Table(
        "Rules", ("rule", "status", "value", "detail"), rows, max(0, len(rules) - TABLE_ROWS)
    )
    analysis = result.analysis
    facts: tuple[str, ...] = ("passed" if result.passed else "failed",)
    judged = _diagnosis_only(result.diagnosis)
    source = "–"
    if analysis is not None:
        facts += _facts(analysis.dialect, analysis.source)
        judged = _judged(ReportDocument.of(analysis))
        source = _source_name(analysis.source)
    return Card("rcdiag check", source, facts, tables=(table,), notes=result.notes, **judged)


def _baseline_card(baseline: Baseline) -> Card:
    facts = (
        *_facts(baseline.dialect, baseline.source),
        f"{len(baseline.bootstrap)} bootstrapped metrics",
        f"{baseline.replicates} replicates",
        f"seed {baseline.seed}",
        f"created {baseline.created}",
    )
    return Card(
        "rcdiag baseline",
        _source_name(baseline.source),
        facts,
        trends=_trends(baseline.step_results),
        **_diagnosis_only(baseline.diagnosis),
    )


def _recommendation_card(recommendation: Recommendation) -> Card:
    rows = tuple(
        (c.role, c.name, c.title, pct((c.expected or {}).get("kept_token_share")))
        for c in recommendation.choices[:TABLE_ROWS]
    )
    table = Table("Choices", ("role", "configuration", "what", "tokens kept"), rows)
    return Card(
        "rcdiag recommend",
        "",
        (
            f"{recommendation.dialect} dialect",
            "measured" if recommendation.measured else "not measured",
        ),
        tables=(table,) if rows else (),
        advice=_advice(recommendation),
        notes=tuple(r.text for r in recommendation.rules)
        + _story(recommendation)
        + recommendation.notes,
    )


def _story(recommendation: Recommendation) -> tuple[str, ...]:
    """What the recommended configuration keeps step by step, when that differs from the whole
    dump (:attr:`~rcdiag.model.advice.KeptByStep.story`)."""
    chosen = recommendation.recommended
    kept = None if chosen is None else chosen.per_step
    return () if kept is None or kept.story is None else (kept.story,)


_BUILDERS: tuple[tuple[type, Any], ...] = (
    (AnalysisResult, _analysis_card),
    (ReportDocument, _report_card),
    (ComparisonResult, _comparison_card),
    (CheckResult, _check_card),
    (Baseline, _baseline_card),
    (Recommendation, _recommendation_card),
)
