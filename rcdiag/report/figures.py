"""The report's plotly figures, built from a result document only (no I/O, no HTML).

Each figure is a :class:`Chart`: an id, a title, a one-line explanation and the plotly figure as a
JSON-ready dict (``data`` and ``layout``). Numbers are rounded to :data:`SIGNIFICANT` digits. The
per-step charts are in :mod:`rcdiag.report.trends`.

Histograms use a *signed log* x axis: u(x) = sign(x)·(log₁₀|x| + 5) for |x| ≥ 10⁻⁵ (0 inside),
labelled with the values of x, so bf16 noise (|ℓ| ≈ 10⁻³) and catastrophic tokens (ℓ ≈ −15) show
side by side.
"""

from __future__ import annotations

import math
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from typing import Any

import plotly.graph_objects as go

from rcdiag.formatting import short
from rcdiag.metrics.profile import LOG_MAGNITUDE_RANGE

SIGNIFICANT = 4

FONT = '-apple-system, BlinkMacSystemFont, "Segoe UI", Roboto, "Helvetica Neue", Arial, sans-serif'
INK, MUTED, GRID = "#1f2937", "#6b7280", "#e5e7eb"
BLUE, TEAL, PURPLE, ORANGE = "#2563eb", "#0d9488", "#7c3aed", "#ea580c"
OK, WARN, FAIL = "#15803d", "#b45309", "#b91c1c"
BAND_OK, BAND_WARN = "rgba(21,128,61,0.07)", "rgba(180,83,9,0.08)"

CATASTROPHIC_LOG_RATIO = math.log(1e-4)
GEO_DEFAULT = math.log(1.001)


@dataclass(frozen=True)
class Chart:
    """One figure of the report."""

    id: str
    title: str
    caption: str
    figure: dict[str, Any]


HEADROOM = 1.12
"""Linear axes end this far above the largest value, so no point sits on the plot edge."""


def _round(value: Any) -> Any:
    """Floats to :data:`SIGNIFICANT` digits (NaN/inf → None), recursively."""
    if isinstance(value, float):
        if not math.isfinite(value):
            return None
        return float(f"{value:.{SIGNIFICANT}g}")
    if isinstance(value, dict):
        return {k: _round(v) for k, v in value.items()}
    if isinstance(value, (list, tuple)):
        return [_round(v) for v in value]
    return value


def base_layout(**extra: Any) -> dict[str, Any]:
    base: dict[str, Any] = {
        "template": None,
        "font": {"family": FONT, "size": 12, "color": INK},
        "paper_bgcolor": "white",
        "plot_bgcolor": "white",
        "margin": {"l": 60, "r": 20, "t": 10, "b": 45},
        "height": 280,
        "showlegend": False,
        "hovermode": "x unified",
        "legend": {"orientation": "h", "y": 1.02, "yanchor": "bottom", "x": 0},
    }
    axis = {"gridcolor": GRID, "linecolor": "#9ca3af", "zeroline": False, "automargin": True}
    base["xaxis"] = {**axis, **extra.pop("xaxis", {})}
    base["yaxis"] = {**axis, **extra.pop("yaxis", {})}
    if "yaxis2" in extra:
        base["yaxis2"] = {**axis, "gridcolor": "rgba(0,0,0,0)", **extra.pop("yaxis2")}
    base.update(extra)
    if base.get("showlegend"):
        base["margin"] = {**base["margin"], "t": 34}
    return base


def plotly_figure(data: Sequence[go.BaseTraceType], layout: dict[str, Any]) -> dict[str, Any]:
    figure = go.Figure(data=list(data), layout=layout).to_plotly_json()
    figure["layout"].pop("template", None)
    return _round({"data": figure["data"], "layout": figure["layout"]})


def threshold_line(
    y: float, label: str, color: str, dash: str = "dash", log: bool = False
) -> tuple[dict, dict]:
    """A horizontal threshold line and its label (annotations on a log axis take log₁₀ y)."""
    shape = {
        "type": "line",
        "xref": "paper",
        "x0": 0,
        "x1": 1,
        "yref": "y",
        "y0": y,
        "y1": y,
        "line": {"color": color, "width": 1.5, "dash": dash},
    }
    note = {
        "xref": "paper",
        "x": 0.01,
        "xanchor": "left",
        "yref": "y",
        "y": math.log10(y) if log else y,
        "yanchor": "bottom",
        "text": label,
        "showarrow": False,
        "font": {"size": 10, "color": color},
        "bgcolor": "rgba(255,255,255,0.75)",
    }
    return shape, note


def symlog(x: float) -> float:
    """u(x) = sign(x)·(log₁₀|x| + 5), 0 for |x| < 10⁻⁵ (module docstring).

    Example:
        >>> symlog(-1.0), symlog(0.0), symlog(1e-3)
        (-5.0, 0.0, 2.0)
    """
    floor = LOG_MAGNITUDE_RANGE[0]
    if abs(x) < 10.0**floor:
        return 0.0
    return math.copysign(math.log10(abs(x)) - floor, x)


def _symlog_axis(low: float, high: float) -> dict[str, Any]:
    ticks = [u for u in range(-9, 10) if low - 0.5 <= u <= high + 0.5]
    labels = []
    for u in ticks:
        if u == 0:
            labels.append("0")
            continue
        value = math.copysign(10.0 ** (abs(u) + LOG_MAGNITUDE_RANGE[0]), u)
        labels.append(f"{value:g}".replace("-", "−"))
    return {"tickvals": ticks, "ticktext": labels, "range": [low - 0.3, high + 0.3]}


def _histogram_layout(
    x_title: str,
    y_title: str,
    low: float,
    high: float,
    marks: list[tuple[dict[str, Any], dict[str, Any]]],
    **extra: Any,
) -> dict[str, Any]:
    """A signed-log-x, log-count histogram with labelled vertical marks."""
    return base_layout(
        xaxis={"title": {"text": x_title}, **_symlog_axis(low, high)},
        yaxis={
            "type": "log",
            "title": {"text": y_title},
            "exponentformat": "power",
            "dtick": 1,  # one tick per decade, no crowded minor ticks
        },
        shapes=[m[0] for m in marks],
        annotations=[m[1] for m in marks if m[1]["text"]],
        hovermode="closest",
        bargap=0,
        **extra,
    )


def _histogram_trace(
    edges: list[float], counts: list[int], name: str, color: str, unit: str
) -> tuple[go.Bar, float, float] | None:
    """Bars at the symlog centres of the occupied bins (outer overflow bins drawn at the edge)."""
    centres, widths, heights, hover = [], [], [], []
    for j, n in enumerate(counts):
        if n == 0:
            continue
        lo = edges[j - 1] if j > 0 else None
        hi = edges[j] if j < len(edges) else None
        u_lo = symlog(lo) if lo is not None else symlog(edges[0]) - 0.25
        u_hi = symlog(hi) if hi is not None else symlog(edges[-1]) + 0.25
        centres.append((u_lo + u_hi) / 2)
        widths.append(max(u_hi - u_lo, 0.05) * 0.92)
        heights.append(n)
        where = (
            f"< {short(hi)}"
            if lo is None
            else f"≥ {short(lo)}"
            if hi is None
            else f"{short(lo)} … {short(hi)}"
        )
        hover.append(f"{unit} {where}: {n:,}")
    if not heights:
        return None
    bar = go.Bar(
        x=centres,
        y=heights,
        width=widths,
        name=name,
        marker={"color": color, "line": {"width": 0}},
        opacity=0.8,
        hovertext=hover,
        hoverinfo="text+name",
    )
    return bar, min(centres), max(centres)


def _vline(u: float, label: str, color: str, y: float = 1.0) -> tuple[dict, dict]:
    shape = {
        "type": "line",
        "xref": "x",
        "x0": u,
        "x1": u,
        "yref": "paper",
        "y0": 0,
        "y1": 1,
        "line": {"color": color, "width": 1.5, "dash": "dash"},
    }
    note = {
        "xref": "x",
        "x": u,
        "xanchor": "left",
        "yref": "paper",
        "y": y,
        "yanchor": "top",
        "text": label,
        "showarrow": False,
        "font": {"size": 10, "color": color},
        "bgcolor": "rgba(255,255,255,0.8)",
    }
    return shape, note


def distribution_charts(document: Mapping[str, Any]) -> list[Chart]:
    """Histograms of token log-ratios and of sequence log-ratios (signed-log x, log counts)."""
    profile = document.get("profile")
    if not profile:
        return []
    edges = profile["histogram_edges"]
    charts: list[Chart] = []
    token = _histogram_trace(edges, profile["token_log_ratio"]["counts"], "tokens", BLUE, "ℓ")
    if token is not None:
        bar, low, high = token
        low, high = min(low, symlog(CATASTROPHIC_LOG_RATIO)), max(high, symlog(math.log(2)))
        marks = [
            _vline(symlog(CATASTROPHIC_LOG_RATIO), "catastrophic: ρ < 1e-4", FAIL),
            _vline(symlog(-math.log(2)), "ρ < 0.5", WARN, 0.88),
            _vline(symlog(math.log(2)), "ρ > 2", WARN, 0.88),
        ]
        layout = _histogram_layout(
            "ℓ = log π_train − log π_rollout (signed log scale)",
            "tokens",
            low,
            high,
            marks,
            height=300,
        )
        charts.append(
            Chart(
                "hist-token",
                "Token log-ratios",
                "Each valid token's ℓ. A healthy dump is a narrow spike around 0; a tail to the left "
                "means tokens the trainer finds far less likely than the rollout engine did.",
                plotly_figure([bar], layout),
            )
        )
    seq_traces = []
    low, high = 0.0, 0.0
    for key, name, color in (
        ("seq_sum_log_ratio", "Σℓ (sequence ratio ∏ρ)", PURPLE),
        ("seq_mean_log_ratio", "mean ℓ (geometric-mean ratio)", TEAL),
    ):
        found = _histogram_trace(edges, profile[key]["counts"], name, color, name.split(" ")[0])
        if found is not None:
            seq_traces.append(found[0])
            low, high = min(low, found[1]), max(high, found[2])
    if seq_traces:
        low, high = min(low, symlog(-math.log(2))), max(high, symlog(math.log(2)))
        marks = [
            _vline(symlog(-math.log(2)), "∏ρ < 0.5", PURPLE),
            _vline(symlog(math.log(2)), "∏ρ > 2", PURPLE),
            _vline(symlog(-GEO_DEFAULT), "±0.1%", TEAL, 0.88),
            _vline(symlog(GEO_DEFAULT), "", TEAL, 0.88),
        ]
        layout = _histogram_layout(
            "per-sequence log-ratio (signed log scale)",
            "sequences",
            low,
            high,
            marks,
            height=320,
            barmode="overlay",
            showlegend=True,
        )
        charts.append(
            Chart(
                "hist-seq",
                "Sequence log-ratios",
                "Purple: Σℓ, the log of the sequence-level IS ratio (outside the purple lines, "
                "decoupled_seq_is_rs rejects). Teal: mean ℓ, what geometric-mean rejection filters "
                "(outside the teal lines, decoupled_geo_rs rejects).",
                plotly_figure(seq_traces, layout),
            )
        )
    return charts


def _bucket_chart(
    id: str,
    title: str,
    caption: str,
    rows: list[Mapping[str, Any]],
    x_title: str,
    second: tuple[str, str, str, bool] | None,
) -> Chart | None:
    rows = [r for r in rows if (r.get("mean_abs_log_ratio") or 0) > 0]
    if not rows:
        return None
    labels = [str(r["label"]) for r in rows]
    counts = [int(r.get("tokens", 0)) for r in rows]
    hover = [
        f"{r['label']}: {r.get('tokens', 0):,} tokens"
        + (f", {r['rows']:,} sequences" if "rows" in r else "")
        + f"<br>mean |ℓ| {short(r['mean_abs_log_ratio'], 3)} · mean ℓ {short(r['mean_log_ratio'], 3)}"
        + f" · k3 {short(r['k3'], 3)} · max |ℓ| {short(r.get('max_abs_log_ratio'), 3)}"
        for r in rows
    ]
    traces: list[go.BaseTraceType] = [
        go.Bar(
            x=labels,
            y=[r["mean_abs_log_ratio"] for r in rows],
            name="mean |ℓ| per token",
            marker={"color": BLUE},
            hovertext=hover,
            hoverinfo="text",
        )
    ]
    layout_extra: dict[str, Any] = {}
    if second is not None:
        key, name, color, log = second
        values: list[Any]
        if key == "token_share":
            total = sum(counts) or 1
            values = [c / total for c in counts]
        else:
            values = [r.get(key) for r in rows]
        traces.append(
            go.Scatter(
                x=labels,
                y=values,
                name=name,
                yaxis="y2",
                mode="lines+markers",
                line={"color": color, "width": 2},
                hoverinfo="skip",
            )
        )
        present = [float(v) for v in values if v]
        log = log and bool(present) and max(present) > 20 * min(present)
        top = max(present) if present else 1.0
        layout_extra["yaxis2"] = {
            "overlaying": "y",
            "side": "right",
            "type": "log" if log else "linear",
            "title": {"text": name, "font": {"color": color}},
            "tickfont": {"color": color},
            "exponentformat": "power",
            "tickmode": "auto",  # plotly's round ticks, not data-derived ones
            "nticks": 6,
            "showgrid": False,
            **({"tickformat": ".0%"} if key == "token_share" else {}),
            # headroom so the top point does not sit on the plot edge
            "range": (
                [math.log10(min(present)) - 0.15, math.log10(top) + 0.15]
                if log
                else [0.0, top * HEADROOM]
            ),
        }
    bar_top = max(float(r["mean_abs_log_ratio"]) for r in rows)
    layout = base_layout(
        xaxis={"title": {"text": x_title}, "type": "category"},
        yaxis={
            "type": "linear",  # bars are lengths: their axis starts at 0
            "title": {"text": "mean |ℓ|"},
            "exponentformat": "power",
            "tickmode": "auto",
            "nticks": 6,
            "range": [0.0, bar_top * HEADROOM],
        },
        hovermode="closest",
        showlegend=True,
        margin={"l": 60, "r": 70, "t": 10, "b": 45},
        **layout_extra,
    )
    return Chart(id, title, caption, plotly_figure(traces, layout))


def where_charts(document: Mapping[str, Any]) -> list[Chart]:
    """Mismatch by rollout probability, by position in the response and by response length."""
    profile = document.get("profile")
    if not profile:
        return []
    charts = [
        _bucket_chart(
            "bucket-prob",
            "By rollout probability of the token",
            "Mean |ℓ| of the tokens the rollout engine sampled with probability p. Low-probability "
            "tokens usually disagree most; the line shows where the tokens are.",
            profile["by_rollout_prob"],
            "rollout probability p = exp(log π_rollout)",
            ("token_share", "share of tokens", MUTED, False),
        ),
        _bucket_chart(
            "bucket-position",
            "By position in the response",
            "Mean |ℓ| by token position (1 = first generated token). A rise late in responses "
            "points to long-context numerics (attention kernels, KV-cache precision).",
            profile["by_position"],
            "token position",
            ("token_share", "share of tokens", MUTED, False),
        ),
        _bucket_chart(
            "bucket-length",
            "By response length",
            "Bars: mean |ℓ| per token. Line: mean |Σℓ| per sequence — it grows with length, which "
            "is why sequence-level ratios explode on long responses.",
            profile["by_length"],
            "response length (valid tokens)",
            ("mean_abs_seq_log_ratio", "mean |Σℓ| per sequence", PURPLE, False),
        ),
    ]
    return [c for c in charts if c is not None]


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
        traces: list[go.BaseTraceType] = [
            go.Scatter(
                x=labels,
                y=[p["summary"]["kept_token_share"] for p in points],
                name="tokens kept",
                mode="lines+markers",
                line={"color": TEAL, "width": 2.5},
                hovertemplate="%{x}: kept %{y:.1%}<extra></extra>",
            ),
            go.Scatter(
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
                go.Scatter(
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
                        go.Scatter(
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
        shape, note = threshold_line(0.95, "keep 95%", MUTED, dash="dot")
        layout = base_layout(
            xaxis={
                "title": {"text": f"threshold ({sweep.get('target', key)})"},
                "type": "category",
            },
            yaxis={"title": {"text": "share"}, "tickformat": ".0%", "range": [0, 1.05]},
            shapes=[shape],
            annotations=[note],
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
        go.Scatter(
            x=c,
            y=[p["summary"]["ess"] for p in points],
            name="ESS",
            mode="lines+markers",
            line={"color": BLUE, "width": 2},
        ),
        go.Scatter(
            x=c,
            y=[p["summary"].get("weight_mass_removed") for p in points],
            name="IS weight mass truncated",
            mode="lines+markers",
            yaxis="y2",
            line={"color": ORANGE, "width": 2},
        ),
    ]
    layout = base_layout(
        xaxis={"title": {"text": "truncation threshold C (token TIS)"}, "type": "log"},
        yaxis={"title": {"text": "ESS"}, "range": [0, 1.05]},
        yaxis2={
            "overlaying": "y",
            "side": "right",
            "title": {"text": "weight mass truncated", "font": {"color": ORANGE}},
            "tickfont": {"color": ORANGE},
            "tickformat": ".2~p",
            "rangemode": "tozero",
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
