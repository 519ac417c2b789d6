"""The self-contained HTML report, rendered from a result document only.

:func:`render_html` takes the JSON document of ``rcdiag report`` (or of ``rcdiag analyze``: the
sections it cannot fill are listed as missing) and returns one HTML page: plotly.js embedded once,
the figures as one JSON blob, CSS and JS inline, no external resource. The jinja2 templates live in
the repository's ``templates/`` (shipped as the package ``rcdiag.templates``). Everything the
template prints is escaped (autoescape on); JSON inside ``<script>`` has ``<``, ``>`` and ``&``
escaped as ``\\u003c`` etc.

The page records its own health for tests and CI: JavaScript errors (``window.onerror``, rejected
promises), how many charts rendered with data, and the resources it fetched, into the JSON of
``<script id="rcdiag-status">`` and ``data-rcdiag-done="1"`` on ``<html>`` once every chart is drawn.
"""

from __future__ import annotations

import importlib.resources
import json
import math
from collections.abc import Mapping
from functools import cache
from pathlib import Path
from typing import Any

from markupsafe import Markup

from rcdiag.assess.recommend import recommend, rule_table
from rcdiag.assess.verdict import CSS_STATUS, verdict
from rcdiag.formatting import count, pct, short
from rcdiag.io.writer import atomic_write
from rcdiag.report.figures import (
    Chart,
    distribution_charts,
    is_sweep_chart,
    rejection_sweep_charts,
    where_charts,
)
from rcdiag.report.trends import steps_note, trend_charts
from rcdiag.results import json_safe

TEMPLATES = Path(str(importlib.resources.files("rcdiag.templates")))
STATUS_WORDS = {"healthy": "Healthy", "watch": "Watch", "act": "Act"}
STATUS_BLURBS = {
    "healthy": "Rollout and training agree. No correction needed; keep logging the metrics.",
    "watch": "A mismatch worth knowing about. Correct it cheaply and keep an eye on it.",
    "act": "The mismatch is large enough to bias training. Correct it, and find its cause.",
}

CHI2_WHAT = (
    "{sq} − 1 of the {w}: ≈ their variance when their mean is ≈ 1; negative when the weights "
    "are below 1 on average."
)

GLOSSARY: tuple[tuple[str, str], ...] = (
    (
        "ℓ, ρ",
        "ℓ = log π_train − log π_rollout of a sampled token; ρ = e^ℓ is its importance weight.",
    ),
    (
        "k1 / k2 / k3",
        "Three estimators of KL divergence from ℓ: k1 = −ℓ, k2 = ½ℓ², k3 = e^ℓ − 1 − ℓ "
        "(k3 is always ≥ 0 and has low variance; verl's k3_kl averages it).",
    ),
    (
        "χ² (chi2)",
        "E[ρ²] − 1: ≈ the variance of the IS weights when E[ρ] ≈ 1; negative when the weights are "
        "below 1 on average.",
    ),
    (
        "ESS",
        "Effective sample size (Kish): (Σw)² / (n Σw²), the share of samples that effectively count "
        "once weighted; 1 when all weights are equal.",
    ),
    (
        "TIS",
        "Truncated importance sampling: each token (or sequence) is reweighted by min(ρ, C), so one "
        "huge weight cannot dominate the gradient.",
    ),
    (
        "IcePop",
        "Instead of truncating, zero the weight of tokens whose ρ falls outside a band "
        "(e.g. [0.5, 5]): they stop contributing to the gradient.",
    ),
    (
        "rejection (RS)",
        "Drop whole tokens or sequences whose divergence exceeds a threshold (geometric mean: "
        "seq_mean_k1; single worst token: seq_max_k2).",
    ),
    (
        "slime's gate",
        "The slime RL framework flags a batch when the mean |Δ log p| per token exceeds 0.1.",
    ),
    (
        "NeMo-RL gate",
        "NVIDIA NeMo-RL flags a bf16 run when the token KL (k3) between engines exceeds 1e-3.",
    ),
    (
        "catastrophic token",
        "A token with ρ < τ (1e-4 by default): the trainer finds it nearly impossible.",
    ),
)
"""Plain-words definitions of the jargon the report uses (the About section)."""

KEY_METRICS: tuple[tuple[str, str, str, str], ...] = (
    (
        "rollout_corr/k3_kl",
        "k3_kl",
        "Token-level KL(π_rollout‖π_train), K3 estimator.",
        "dense bf16 1e-5 … 1e-3 · MoE 1e-3 … 1e-1",
    ),
    (
        "rcdiag/abs_log_ratio_mean",
        "mean |Δ log p|",
        "Average per-token disagreement |log π_train − log π_rollout|.",
        "bf16 ≈ 0.01 · fp8 ≈ 0.27 · slime gate 0.1",
    ),
    (
        "rollout_corr/kl",
        "kl",
        "Mean log π_rollout − log π_train: > 0 when the rollout engine is over-confident.",
        "verl: |kl| ≤ 0.1",
    ),
    (
        "rollout_corr/chi2_token",
        "chi2_token",
        CHI2_WHAT.format(w="token IS weights ρ", sq="E[ρ²]"),
        "verl: > 1 is severe",
    ),
    (
        "rollout_corr/chi2_seq",
        "chi2_seq",
        CHI2_WHAT.format(w="sequence IS weights ∏ρ", sq="E[(∏ρ)²]"),
        "> 1: sequence-level IS unreliable",
    ),
    (
        "rcdiag/ess_token",
        "ESS · token",
        "Effective share of tokens once weighted by ρ.",
        "verl: ≥ 0.3",
    ),
    (
        "rcdiag/ess_seq",
        "ESS · sequence",
        "Effective share of sequences once weighted by ∏ρ.",
        "≥ 0.5 for sequence-level IS",
    ),
    (
        "rcdiag/veto_fraction",
        "catastrophic sequences",
        "Sequences holding a token with π_train/π_rollout < τ.",
        "verl: ≤ 10%",
    ),
    (
        "rcdiag/catastrophic_token_fraction",
        "catastrophic tokens",
        "Tokens with π_train/π_rollout < τ (τ = 1e-4 unless set).",
        "≥ 1e-5 calls for a max criterion",
    ),
    (
        "rollout_corr/log_ppl_abs_diff",
        "log_ppl_abs_diff",
        "Mean over sequences of |mean token Δ log p|: what geometric rejection filters.",
        "decoupled_geo_rs band: 0.001",
    ),
    (
        "rcdiag/ratio_outside_0.5_2",
        "tokens with ρ ∉ [0.5, 2]",
        "Tokens whose probability differs by more than 2× between the engines.",
        "",
    ),
    (
        "rcdiag/response_length_mean",
        "response length",
        "Valid tokens per sequence (mean; max in the note).",
        "",
    ),
)
"""The key-metric cards: metric, label, what it measures, the published ranges."""

SHARES = {
    "rcdiag/veto_fraction",
    "rcdiag/catastrophic_token_fraction",
    "rcdiag/ratio_outside_0.5_2",
}

SUMMARY_COLUMNS: tuple[tuple[str, str], ...] = (
    ("kept_token_share", "kept tokens"),
    ("kept_sequence_share", "sequences untouched"),
    ("rejected_sequence_share", "sequences rejected"),
    ("weight_mass_removed", "IS mass truncated"),
    ("ess", "ESS"),
    ("max_weight", "max weight"),
)
SHARE_FIGURES = {
    "kept_token_share",
    "kept_sequence_share",
    "rejected_sequence_share",
    "weight_mass_removed",
}


def json_for_script(value: Any) -> Markup:
    """JSON safe inside ``<script type="application/json">``: no ``</script>``, NaN → null.

    Example:
        >>> str(json_for_script({"a": "</script><b>&", "n": float("nan")}))
        '{"a":"\\\\u003c/script\\\\u003e\\\\u003cb\\\\u003e\\\\u0026","n":null}'
    """
    text = json.dumps(json_safe(value), separators=(",", ":"), allow_nan=False, ensure_ascii=False)
    text = text.replace("<", "\\u003c").replace(">", "\\u003e").replace("&", "\\u0026")
    text = text.replace("\u2028", "\\u2028").replace("\u2029", "\\u2029")
    return Markup(text)


@cache
def _environment() -> Any:
    import jinja2

    env = jinja2.Environment(
        loader=jinja2.FileSystemLoader(str(TEMPLATES)),
        autoescape=True,
        undefined=jinja2.StrictUndefined,
        trim_blocks=True,
        lstrip_blocks=True,
    )
    env.filters["fmt"] = short
    env.filters["pct"] = pct
    env.filters["count"] = count
    return env


@cache
def plotly_js() -> str:
    """The plotly.js bundle shipped with the plotly package (embedded once per report)."""
    from plotly.offline import get_plotlyjs

    return str(get_plotlyjs())


def _asset(name: str) -> Markup:
    return Markup((TEMPLATES / name).read_text(encoding="utf-8"))


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


def _gauge_view(gauge: Mapping[str, Any]) -> dict[str, Any]:
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


def _metric_status(metric: str, value: float | None, checks: Mapping[str, Any]) -> str:
    """The page's colour class of a metric's registry status (``info`` for unjudged metrics)."""
    if metric in checks:
        return CSS_STATUS[checks[metric]["status"]]
    return "info"


def _key_metrics(document: Mapping[str, Any]) -> list[dict[str, Any]]:
    overall = document.get("overall") or {}
    checks = {c["metric"]: c for c in document.get("checks") or []}
    cards = []
    for metric, label, what, ranges in KEY_METRICS:
        if metric not in overall:
            continue
        value = overall.get(metric)
        shown = pct(value) if metric in SHARES else short(value, 3)
        note = ranges
        if metric == "rcdiag/response_length_mean":
            shown = count(value)
            note = f"max {count(overall.get('rcdiag/response_length_max'))}"
        cards.append(
            {
                "metric": metric,
                "label": label,
                "value": shown,
                "what": what,
                "ranges": note,
                "status": _metric_status(metric, value, checks),
            }
        )
    return cards


def _summary_cells(summary: Mapping[str, Any] | None) -> list[str]:
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
    role_of: dict[str, str] = {}
    for c in choices:
        if c.get("evaluated") and c["evaluated"]["kind"] == "preset":
            role_of.setdefault(c["evaluated"]["ref"], c["role"])
        elif c.get("preset"):
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
                "cells": _summary_cells(summary),
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
                    {"threshold": p["threshold"], "cells": _summary_cells(p.get("summary"))}
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
                "file": _short_path(r.get("file"), root),
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
    return {
        "trends": trend_charts(document),
        "distributions": distribution_charts(document),
        "where": where_charts(document),
        "presets": presets,
    }


def view_model(document: Mapping[str, Any]) -> dict[str, Any]:
    """Everything the template prints, from the document (verdict and advice computed if absent)."""
    the_verdict = document.get("verdict") or verdict(document)
    recommendation = document.get("recommendation") or recommend(document)
    full = {**document, "verdict": the_verdict, "recommendation": recommendation}
    charts = all_charts(full)
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
            "blurb": STATUS_BLURBS.get(str(status), ""),
            "css": status or "none",
            "gauges": [_gauge_view(g) for g in the_verdict.get("deciding") or []],
        },
        "causes": (document.get("diagnosis") or {}).get("causes") or [],
        "recommendation": recommendation,
        "primary": choices[0] if choices else None,
        "alternatives": choices[1:],
        "rule_table": rule_table(),
        "glossary": GLOSSARY,
        "measured": recommendation.get("measured", True),
        "metrics": _key_metrics(document),
        "charts": charts,
        "steps_note": steps_note(len(document.get("steps") or [])),
        "figures_json": json_for_script(figures),
        "chart_count": len(figures),
        "summary_columns": [label for _, label in SUMMARY_COLUMNS],
        "presets": _preset_rows(document, recommendation),
        "aliases": document.get("preset_aliases") or {},
        "sweeps": _sweep_views(document),
        "offenders": _offenders(document),
        "veto_threshold": (document.get("options") or {}).get("effective_veto_threshold", 1e-4),
        "missing": missing_sections(document),
        "frameworks": _framework_rows(document),
    }


FRAMEWORK_BADGES = {"healthy": "ok", "watch": "warn", "act": "fail"}


def _framework_rows(document: Mapping[str, Any]) -> list[dict[str, Any]]:
    """One row per metric of every framework in the document's ``frameworks`` section."""
    rows = []
    for entry in document.get("frameworks") or []:
        checks = {c["metric"]: c for c in entry.get("checks") or []}
        for name, value in (entry.get("overall") or {}).items():
            check = checks.get(name) or {}
            rows.append(
                {
                    "title": entry.get("title", entry.get("framework")),
                    "metric": name.split("/", 1)[-1],
                    "value": short(value),
                    "status": check.get("status"),
                    "css": FRAMEWORK_BADGES.get(str(check.get("status")), "info"),
                    "band": check.get("band"),
                }
            )
    return rows


def render_html(document: Mapping[str, Any]) -> str:
    """The report page for a result document (module docstring)."""
    env = _environment()
    template = env.get_template("report.html.j2")
    return str(
        template.render(
            **view_model(document),
            css=_asset("report.css"),
            script=_asset("report.js"),
            plotly_js=Markup(plotly_js()),
        )
    )


def write_html(path: str | Path, document: Mapping[str, Any]) -> int:
    """Render and write the report atomically; returns its size in bytes."""
    html = render_html(document)
    data = html.encode("utf-8", "backslashreplace")  # a file name's undecodable bytes: \udcff
    with atomic_write(path, "wb") as handle:
        handle.write(data)
    return len(data)


__all__ = ["Chart", "render_html", "view_model", "write_html"]
