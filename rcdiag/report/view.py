"""The report's view model: what the template prints, built from a result document only.

No decision and no wording of a judgement here: the verdict, its headline and blurb, the causes, the
recommendation and every threshold come from :mod:`rcdiag.assess`; this module lays them out
(gauge positions, table cells, card values) and gathers the charts.
"""

from __future__ import annotations

import math
from collections.abc import Mapping
from pathlib import Path
from typing import Any

from rcdiag.assess.diagnosis.causes import CAUSE_TITLES
from rcdiag.assess.recommendation.rules import rule_table
from rcdiag.assess.references import references
from rcdiag.assess.verdict.gauges import CSS_STATUS
from rcdiag.assess.wording import STATUS_WORDS, ranges_text
from rcdiag.formatting import count, pct, short
from rcdiag.io.paths import printable
from rcdiag.metrics.offpolicy import DEFAULT_VETO_THRESHOLD
from rcdiag.metrics.records import KEY_METRICS, REGISTRY, RESPONSE_LENGTH_MEAN
from rcdiag.report.buckets import where_charts
from rcdiag.report.figures import Chart
from rcdiag.report.histograms import distribution_charts
from rcdiag.report.sweeps import is_sweep_chart, kept_by_step_chart, rejection_sweep_charts
from rcdiag.report.texts import (
    GLOSSARY,
    SHARE_FIGURES,
    SUMMARY_COLUMNS,
)
from rcdiag.report.trends import steps_note, trend_charts
from rcdiag.status import rank


def _position(value: float, scale: Mapping[str, Any]) -> float:
    """Where ``value`` sits on a gauge, 0 … 100 (%)."""
    lo, hi = float(scale["lo"]), float(scale["hi"])
    if scale["log"]:
        if value <= 0:
            return 0.0
        at = (math.log10(value) - math.log10(lo)) / (math.log10(hi) - math.log10(lo))
    else:
        at = (value - lo) / (hi - lo)
    return 100.0 * min(1.0, max(0.0, at))


def gauge_view(gauge: Mapping[str, Any]) -> dict[str, Any]:
    scale = gauge["scale"]
    segments, start = [], 0.0
    for band in scale["bands"]:
        upto = band["upto"]
        end = 100.0 if upto is None or upto == math.inf else _position(float(upto), scale)
        if end > start:
            segments.append({"left": start, "width": end - start, "status": band["status"]})
        start = end
    ticks = []
    if scale["log"]:
        lo, hi = math.log10(scale["lo"]), math.log10(scale["hi"])
        step = 1 if hi - lo <= 6 else 2
        for e in range(math.ceil(lo), math.floor(hi) + 1, step):
            ticks.append({"at": _position(10.0**e, scale), "label": f"{10.0**e:g}"})
    else:
        lo, hi = float(scale["lo"]), float(scale["hi"])
        for i in range(6):
            x = lo + (hi - lo) * i / 5
            ticks.append({"at": _position(x, scale), "label": f"{x:g}"})
    markers = [
        {"at": _position(float(m["at"]), scale), "label": m["label"]} for m in scale["markers"]
    ]
    value = gauge.get("value")
    return {
        **gauge,
        "segments": segments,
        "ticks": ticks,
        "markers": markers,
        "at": _position(float(value), scale) if value is not None else None,
    }


def _ranges(metric: str) -> str:
    """A card's line of ranges: the registry's bands and reference marks, or the preset band."""
    record = REGISTRY.get(metric)
    if record is not None and record.bands:
        marks = [label for _, label in record.gauge.marks] if record.gauge else []
        return " · ".join([ranges_text(metric), *marks])
    return " · ".join(r.label for r in references(metric))


def key_metric_cards(document: Mapping[str, Any]) -> list[dict[str, Any]]:
    overall = document.get("overall") or {}
    checks = {c["metric"]: c for c in document.get("checks") or []}
    cards = []
    for record in KEY_METRICS:
        metric, label, what = record.name, record.label, record.what
        if metric not in overall:
            continue
        value = overall.get(metric)
        shown = pct(value) if record.share else short(value, 3)
        note = _ranges(metric)
        if record is RESPONSE_LENGTH_MEAN:
            shown = count(value)
            note = f"max {count(overall.get('rcdiag/response_length_max'))}"
        status = checks[metric]["status"] if metric in checks else None
        cards.append(
            {
                "metric": metric,
                "label": label,
                "value": shown,
                "what": what,
                "ranges": note,
                "status": CSS_STATUS[status] if status else "info",
                "word": status or "info",
            }
        )
    return cards


def summary_cells(summary: Mapping[str, Any] | None) -> list[str]:
    summary = summary or {}
    cells = []
    for key, _ in SUMMARY_COLUMNS:
        value = summary.get(key)
        cells.append(pct(value) if key in SHARE_FIGURES else short(value, 3))
    return cells


def _choice_view(choice: Mapping[str, Any]) -> dict[str, Any]:
    expected = choice.get("expected") or {}
    figures = []
    if expected:
        kept_rows = expected.get("kept_sequence_share")
        figures = [
            ("tokens kept", pct(expected.get("kept_token_share"))),
            ("sequences rejected", pct(None if kept_rows is None else 1.0 - kept_rows)),
            ("ESS", short(expected.get("ess"), 3)),
            ("IS mass truncated", pct(expected.get("weight_mass_removed"))),
        ]
    return {**choice, "figures": figures}


def _preset_rows(document: Mapping[str, Any], recommendation: Mapping[str, Any]) -> list[dict]:
    choices = recommendation.get("choices") or []
    configs = {p["name"]: p.get("config") for p in document.get("presets") or []}
    role_of: dict[str, str] = {}
    for c in choices:
        if c.get("evaluated") and c["evaluated"]["kind"] == "preset":
            role_of.setdefault(c["evaluated"]["ref"], c["role"])
        elif c.get("preset") and configs.get(c["preset"]) == c.get("config"):
            # a sweep point is that preset's row only at the preset's own thresholds
            role_of.setdefault(c["preset"], c["role"])
    avoid_of = {
        p["name"]: group["reason"]
        for group in recommendation.get("avoid") or []
        for p in group["presets"]
    }
    rows = []
    for p in document.get("presets") or []:
        summary = p.get("summary") or {}
        emptied = summary.get("fully_rejected_steps") or []
        rows.append(
            {
                "name": p["name"],
                "purpose": p.get("purpose", ""),
                "cells": summary_cells(summary),
                "role": role_of.get(p["name"]),
                "avoid": avoid_of.get(p["name"]),
                "emptied": emptied,
            }
        )
    return rows


def _sweep_views(document: Mapping[str, Any]) -> list[dict[str, Any]]:
    views = []
    for sweep in document.get("sweeps") or []:
        views.append(
            {
                "title": sweep.get("title") or sweep.get("target"),
                "key": sweep.get("key", sweep.get("target")),
                "rows": [
                    {"threshold": p["threshold"], "cells": summary_cells(p.get("summary"))}
                    for p in sweep["points"]
                ],
            }
        )
    return views


def _ratio(log_ratio: float | None) -> str:
    """ρ = e^ℓ of the worst token, readable from 1e-7 to 1e7."""
    if log_ratio is None:
        return "–"
    return short(math.exp(max(-700.0, min(700.0, float(log_ratio)))), 3)


def _short_path(path: str | None, root: str) -> str | None:
    if path is None:
        return None
    prefix = root.rstrip("/") + "/"
    return path[len(prefix) :] if path.startswith(prefix) else path


UID_CHARACTERS = 80
"""Characters of a ``uid`` (or a file name) shown in the offenders' table; longer ones are cut
with an ellipsis."""


def _on_page(value: Any) -> str | None:
    r"""A user string for the page: control characters and bidirectional overrides spelled as
    escapes (a NUL, an ESC or U+202E never reaches the page raw), cut to :data:`UID_CHARACTERS`.

    Example:
        >>> _on_page("a\u202eb\x00"), _on_page("x" * 100)[-3:]
        ('a\\u202eb\\x00', 'xx…')
    """
    if value is None:
        return None
    text = printable(str(value))
    return text if len(text) <= UID_CHARACTERS else text[: UID_CHARACTERS - 1] + "…"


def _offenders(document: Mapping[str, Any]) -> dict[str, Any] | None:
    profile = document.get("profile")
    if not profile:
        return None
    root = _source_view(document)["name"]
    top = {
        name: [
            {
                **r,
                "rho": _ratio(r.get("worst_token_log_ratio")),
                "file": _on_page(_short_path(r.get("file"), root)),
                "uid": _on_page(r.get("uid")),
            }
            for r in rows
        ]
        for name, rows in (profile.get("top_sequences") or {}).items()
    }
    records = [r for rows in top.values() for r in rows]
    return {
        "by_abs_sum": top.get("by_abs_sum") or [],
        "by_max_token": top.get("by_max_token") or [],
        "has_uid": any(r.get("uid") is not None for r in records),
        "has_file": any(r.get("file") is not None for r in records),
    }


def cause_views(document: Mapping[str, Any]) -> list[dict[str, Any]]:
    causes = (document.get("diagnosis") or {}).get("causes") or []
    shown = [
        {**c, "title": CAUSE_TITLES.get(c["id"], c["id"]), "summary": _capital(c["summary"])}
        for c in causes
    ]
    return sorted(shown, key=lambda c: -rank(c["severity"]))  # most severe first


def _capital(text: str) -> str:
    """A sentence's first letter in capitals, unless it starts with a name (``k3_kl rises``)."""
    first = text.split(" ", 1)[0]
    return text if "_" in first or not text else text[0].upper() + text[1:]


def missing_sections(document: Mapping[str, Any]) -> list[str]:
    """What the document cannot show, in words (an analyze JSON lacks the report's extras)."""
    missing = []
    if not document.get("overall"):
        missing.append("overall metrics, verdict and key metrics (no 'overall' in the results)")
    if len(document.get("steps") or []) < 2:
        missing.append("per-step trends (fewer than two steps)")
    if not document.get("profile"):
        missing.append(
            "distributions, where the mismatch lives and the top offending sequences "
            "(no 'profile': run rcdiag report on the dump)"
        )
    if not document.get("presets"):
        missing.append("the preset comparison (no 'presets': run rcdiag report on the dump)")
    if not (document.get("sweeps") or document.get("sweep")):
        missing.append("the threshold sweeps (no 'sweeps')")
    return missing


def _source_view(document: Mapping[str, Any]) -> dict[str, Any]:
    source = document.get("source") or {}
    paths = source.get("paths") or []
    common = str(Path(paths[0]).parent) if len(paths) > 1 else (paths[0] if paths else "–")
    if len(paths) > 1:
        parents = {str(Path(p).parent.parent) for p in paths}
        if len(parents) == 1:
            common = parents.pop()
    return {
        "name": common,
        "files": len(paths),
        "rows": count(source.get("rows")),
        "valid_tokens": count(source.get("valid_tokens")),
        "steps": count(source.get("steps")),
        "dropped": source.get("dropped_nonfinite") or 0,
    }


def all_charts(document: Mapping[str, Any]) -> dict[str, list[Chart]]:
    """Every chart the document supports, by report section."""
    recommendation = document.get("recommendation") or {}
    choices = recommendation.get("choices") or []
    ref = None
    if choices and choices[0].get("evaluated"):
        ref = choices[0]["evaluated"]["ref"]
    is_chart = is_sweep_chart(document)
    presets = [*rejection_sweep_charts(document, ref), *([is_chart] if is_chart else [])]
    kept = kept_by_step_chart(document)
    return {
        "recommendation": [kept] if kept is not None else [],
        "trends": trend_charts(document),
        "distributions": distribution_charts(document),
        "where": where_charts(document),
        "presets": presets,
    }


def view_model(document: Mapping[str, Any]) -> dict[str, Any]:
    """Everything the template prints, from the JSON of a complete document (one that holds its
    verdict and recommendation: :func:`rcdiag.run.documents.page_json`)."""
    the_verdict = document["verdict"]
    recommendation = document["recommendation"]
    charts = all_charts(document)
    figures = {c.id: c.figure for section in charts.values() for c in section}
    status = the_verdict.get("status")
    choices = [_choice_view(c) for c in recommendation.get("choices") or []]
    return {
        "title": f"rcdiag report — {_source_view(document)['name']}",
        "source": _source_view(document),
        "dialect": document.get("dialect", "latest"),
        "version": document.get("rcdiag_version", "?"),
        "schema_version": document.get("schema_version", "?"),
        "verdict": {
            **the_verdict,
            "word": STATUS_WORDS.get(str(status), "No verdict"),
            "blurb": the_verdict.get("blurb", ""),
            "css": status or "none",
            "gauges": [gauge_view(g) for g in the_verdict.get("deciding") or []],
        },
        "causes": cause_views(document),
        "recommendation": recommendation,
        "primary": choices[0] if choices else None,
        "alternatives": choices[1:],
        "rule_table": rule_table(),
        "glossary": GLOSSARY,
        "measured": recommendation.get("measured", True),
        "metrics": key_metric_cards(document),
        "charts": charts,
        "steps_note": steps_note(len(document.get("steps") or [])),
        "figures": figures,
        "chart_count": len(figures),
        "summary_columns": [label for _, label in SUMMARY_COLUMNS],
        "presets": _preset_rows(document, recommendation),
        "aliases": document.get("preset_aliases") or {},
        "sweeps": _sweep_views(document),
        "offenders": _offenders(document),
        "veto_threshold": (document.get("options") or {}).get(
            "effective_veto_threshold", DEFAULT_VETO_THRESHOLD
        ),
        "missing": missing_sections(document),
        "frameworks": _framework_rows(document),
        "framework_notes": [
            {"title": e.get("title", e.get("framework")), "text": e["aggregation"]}
            for e in document.get("frameworks") or []
            if e.get("aggregation")
        ],
    }


def _framework_rows(document: Mapping[str, Any]) -> list[dict[str, Any]]:
    """One row per metric of every framework in the document's ``frameworks`` section, with the
    status of the ones the framework gates in its CI."""
    rows = []
    for entry in document.get("frameworks") or []:
        checks = {c["metric"]: c for c in entry.get("checks") or []}
        for name, value in (entry.get("overall") or {}).items():
            check = checks.get(name) or {}
            status = check.get("status")
            gate = None if status is None else "within" if status == "healthy" else "breached"
            rows.append(
                {
                    "title": entry.get("title", entry.get("framework")),
                    "metric": name.split("/", 1)[-1],
                    "value": short(value),
                    "status": gate,
                    "css": CSS_STATUS.get(str(status), "info"),
                    "band": check.get("band"),
                }
            )
    return rows
