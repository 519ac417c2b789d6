"""What each preset would do: the threshold sweeps, as charts.

Rejection sweeps draw the kept token share and the ESS against the threshold (the recommended point
starred, the keep target of :mod:`rcdiag.assess.references` as a named reference line); the token-TIS
sweep draws ESS and the IS weight mass truncated against C, on a log axis ticked at the grid's C.
"""

from __future__ import annotations

import math
from collections.abc import Mapping
from typing import Any

import numpy as np

from rcdiag.assess.references import KEEP_TARGET
from rcdiag.report.figures import (
    BLUE,
    INK,
    MUTED,
    ORANGE,
    PURPLE,
    TEAL,
    Chart,
    Trace,
    base_layout,
    log_ticks,
    nice_ticks,
    percent_label,
    plotly_figure,
    reference_line,
    scatter,
)
from rcdiag.report.steps import _traces, bucket_size

SHARE_RANGE = [0.0, 1.08]
"""Share axes end above 100%, so a point (or the star) at 100% is not cut."""


SWEEP_CHARTS: tuple[tuple[str, str | None, str, str], ...] = (
    (
        "geo",
        "geo+max",
        "Geometric-mean rejection: choosing the band",
        "Share of tokens kept (solid) and ESS of the surviving token-TIS weights (light) when "
        "sequences whose geometric-mean ratio leaves [1/x, x] are rejected. Dashed: the same with "
        "the max-token criterion added. Grey line: the 95% keep target.",
    ),
    (
        "max",
        None,
        "Max-token rejection: choosing the limit",
        "Share of tokens kept when a sequence holding one token beyond the limit is rejected "
        "(latest: seq_max_k2 h, |ℓ| > √(2h); legacy: veto τ). The veto-equivalent limit is 42.4 "
        "(latest) or τ = 1e-4 (legacy).",
    ),
)


def _sweep_by_key(document: Mapping[str, Any], key: str) -> Mapping[str, Any] | None:
    return next((s for s in document.get("sweeps") or [] if s.get("key") == key), None)


def rejection_sweep_charts(
    document: Mapping[str, Any], recommended_ref: str | None = None
) -> list[Chart]:
    """Per rejection sweep: kept token share and ESS against the threshold, the pick starred."""
    charts: list[Chart] = []
    for key, companion, title, caption in SWEEP_CHARTS:
        sweep = _sweep_by_key(document, key)
        if sweep is None:
            continue
        points = [p for p in sweep["points"] if p["summary"].get("kept_token_share") is not None]
        if not points:
            continue
        labels = [str(p["threshold"]) for p in points]
        traces: list[Trace] = [
            scatter(
                x=labels,
                y=[p["summary"]["kept_token_share"] for p in points],
                name="tokens kept",
                mode="lines+markers",
                line={"color": TEAL, "width": 2.5},
                hovertemplate="%{x}: kept %{y:.1%}<extra></extra>",
            ),
            scatter(
                x=labels,
                y=[p["summary"].get("ess") for p in points],
                name="ESS",
                mode="lines+markers",
                line={"color": "#93c5fd", "width": 2},
                hovertemplate="%{x}: ESS %{y:.3f}<extra></extra>",
            ),
        ]
        other = _sweep_by_key(document, companion) if companion else None
        if other is not None:
            by_threshold = {str(p["threshold"]): p["summary"] for p in other["points"]}
            traces.append(
                scatter(
                    x=labels,
                    y=[(by_threshold.get(x) or {}).get("kept_token_share") for x in labels],
                    name="kept, with max-token rejection",
                    mode="lines",
                    line={"color": PURPLE, "width": 2, "dash": "dash"},
                    hovertemplate="%{x}: kept %{y:.1%}<extra></extra>",
                )
            )
        for ref_key in (key, companion):
            if recommended_ref and ref_key and recommended_ref.startswith(f"{ref_key}@"):
                chosen = recommended_ref.split("@", 1)[1]
                summary = next(
                    (
                        p["summary"]
                        for p in (_sweep_by_key(document, ref_key) or {"points": []})["points"]
                        if str(p["threshold"]) == chosen
                    ),
                    None,
                )
                if summary and chosen in labels:
                    traces.append(
                        scatter(
                            x=[chosen],
                            y=[summary["kept_token_share"]],
                            name="recommended",
                            mode="markers",
                            marker={
                                "symbol": "star",
                                "size": 17,
                                "color": "#facc15",
                                "line": {"color": INK, "width": 1},
                            },
                            hovertemplate="recommended: %{x}, kept %{y:.1%}<extra></extra>",
                        )
                    )
        traces.append(
            reference_line(labels, KEEP_TARGET, f"keep {KEEP_TARGET:.0%}", MUTED, dash="dot")
        )
        layout = base_layout(
            xaxis={
                "title": {"text": f"threshold ({sweep.get('target', key)})"},
                "type": "category",
            },
            yaxis={"title": {"text": "share"}, "tickformat": ".0%", "range": SHARE_RANGE},
            showlegend=True,
        )
        charts.append(
            Chart(f"sweep-{key.replace('+', '-')}", title, caption, plotly_figure(traces, layout))
        )
    return charts


def is_sweep_chart(document: Mapping[str, Any]) -> Chart | None:
    """Token TIS: the threshold C against ESS and the share of weight mass truncated."""
    sweep = next((s for s in document.get("sweeps") or [] if s.get("key") == "is"), None)
    if sweep is None:
        return None
    points = [p for p in sweep["points"] if p["summary"].get("ess") is not None]
    if not points:
        return None
    c = [float(p["threshold"]) for p in points]
    traces = [
        scatter(
            x=c,
            y=[p["summary"]["ess"] for p in points],
            name="ESS",
            mode="lines+markers",
            line={"color": BLUE, "width": 2},
            hovertemplate="C = %{x}: ESS %{y:.3f}<extra></extra>",
        ),
        scatter(
            x=c,
            y=[p["summary"].get("weight_mass_removed") for p in points],
            name="IS weight mass truncated",
            mode="lines+markers",
            yaxis="y2",
            line={"color": ORANGE, "width": 2},
            hovertemplate="C = %{x}: %{y:.3~%} of the IS weight mass truncated<extra></extra>",
        ),
    ]
    removed = [float(p["summary"].get("weight_mass_removed") or 0.0) for p in points]
    ticks = nice_ticks(max(removed) or 0.01, 4)
    layout = base_layout(
        xaxis={"title": {"text": "truncation threshold C (token TIS)"}, **log_ticks(c)},
        yaxis={"title": {"text": "ESS"}, "range": SHARE_RANGE},
        yaxis2={
            "overlaying": "y",
            "side": "right",
            "title": {"text": "weight mass truncated", "font": {"color": ORANGE}},
            "tickfont": {"color": ORANGE},
            "tickmode": "array",
            "tickvals": ticks,
            "ticktext": [percent_label(v) for v in ticks],
            "range": [0.0, ticks[-1] * SHARE_RANGE[1]],
        },
        showlegend=True,
        margin={"l": 60, "r": 70, "t": 10, "b": 45},
    )
    return Chart(
        "is-sweep",
        "Token TIS: choosing C",
        "A small C truncates more weight (bias, orange); a large C lets rare big weights through "
        "(variance: ESS falls, blue). verl's default is C = 2.",
        plotly_figure(traces, layout),
    )


def kept_by_step_chart(document: Mapping[str, Any]) -> Chart | None:
    """The recommended configuration's kept shares at each step (tokens, sequences; buckets of
    consecutive steps for long runs, as the trends), with the keep target; None when the
    recommendation holds no per-step figures or keeps everything at every step."""
    choices = (document.get("recommendation") or {}).get("choices") or []
    kept = (choices[0].get("per_step") if choices else None) or {}
    if not kept.get("story"):
        return None
    x = np.asarray(kept["step"], dtype=np.int64)
    size = bucket_size(x.size)
    traces: list[Trace] = []
    for name, values, color in (
        ("tokens kept", kept["kept_token_share"], TEAL),
        ("sequences kept", kept["kept_sequence_share"], PURPLE),
    ):
        y = np.asarray([math.nan if v is None else v for v in values], dtype=np.float64)
        traces += _traces(x, y, size, name, color)
    traces.append(
        reference_line(x.tolist(), KEEP_TARGET, f"keep {KEEP_TARGET:.0%}", MUTED, dash="dot")
    )
    recent = kept["recent"]
    layout = base_layout(
        xaxis={"title": {"text": "step"}},
        yaxis={"title": {"text": "share kept"}, "tickformat": ".0%", "range": SHARE_RANGE},
        showlegend=True,
    )
    return Chart(
        "kept-by-step",
        f"{choices[0].get('name', 'The recommendation')}: what it keeps at each step",
        f"Share of the valid tokens (teal) and of the sequences (purple) the recommended "
        f"configuration keeps at each step; recent steps {recent['first_step']}–"
        f"{recent['last_step']}. Grey line: the 95% keep target.",
        plotly_figure(traces, layout),
    )
