"""Histograms of the log-ratios: how large the disagreements are.

Histograms use a *signed log* x axis: u(x) = sign(x)·(log₁₀|x| + 5) for |x| ≥ 10⁻⁵ (0 inside),
labelled with the values of x, so bf16 noise (|ℓ| ≈ 10⁻³) and catastrophic tokens (ℓ ≈ −15) show
side by side. Vertical reference lines are named in the legend, not over the bars.
"""

from __future__ import annotations

import math
from collections.abc import Mapping
from typing import Any

from rcdiag.assess.references import RATIO_BAND, geo_band
from rcdiag.formatting import short
from rcdiag.metrics.bins import LOG_MAGNITUDE_RANGE
from rcdiag.metrics.offpolicy import DEFAULT_VETO_THRESHOLD
from rcdiag.report.figures import (
    BLUE,
    FAIL,
    PURPLE,
    TEAL,
    WARN,
    Chart,
    Trace,
    bar,
    base_layout,
    plotly_figure,
    scatter,
)


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
    marks: list[tuple[dict[str, Any], Trace | None]],
    tallest: int,
    **extra: Any,
) -> dict[str, Any]:
    """A signed-log-x, log-count histogram with labelled vertical marks; the count axis ends above
    the tallest bar."""
    return base_layout(
        xaxis={"title": {"text": x_title}, **_symlog_axis(low, high)},
        yaxis={
            "type": "log",
            "title": {"text": y_title},
            "exponentformat": "power",
            "dtick": 1,  # one tick per decade, no crowded minor ticks
            "range": [-0.2, math.log10(max(tallest, 1)) + 0.25],
        },
        shapes=[m[0] for m in marks],
        hovermode="closest",
        showlegend=True,
        bargap=0,
        **extra,
    )


def _histogram_trace(
    edges: list[float], counts: list[int], name: str, color: str, unit: str
) -> tuple[Trace, float, float] | None:
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
    trace = bar(
        x=centres,
        y=heights,
        width=widths,
        name=name,
        marker={"color": color, "line": {"width": 0}},
        opacity=0.8,
        hovertext=hover,
        hoverinfo="text+name",
    )
    return trace, min(centres), max(centres)


def _vline(u: float, label: str, color: str) -> tuple[dict[str, Any], Trace | None]:
    """A dashed vertical line across the plot and, when ``label`` is set, its legend entry."""
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
    if not label:
        return shape, None
    entry = scatter(
        x=[None],
        y=[None],
        name=label,
        mode="lines",
        line={"color": color, "width": 1.5, "dash": "dash"},
        hoverinfo="skip",
    )
    return shape, entry


def _legend(marks: list[tuple[dict[str, Any], Trace | None]]) -> list[Trace]:
    return [m[1] for m in marks if m[1] is not None]


def distribution_charts(document: Mapping[str, Any]) -> list[Chart]:
    """Histograms of token log-ratios and of sequence log-ratios (signed-log x, log counts)."""
    profile = document.get("profile")
    if not profile:
        return []
    tau = float((document.get("options") or {}).get("effective_veto_threshold") or 0.0)
    tau = tau if tau > 0 else DEFAULT_VETO_THRESHOLD
    lower, upper = (math.log(r) for r in RATIO_BAND)
    edges = profile["histogram_edges"]
    charts: list[Chart] = []
    token = _histogram_trace(edges, profile["token_log_ratio"]["counts"], "tokens", BLUE, "ℓ")
    if token is not None:
        bar_trace, low, high = token
        low, high = min(low, symlog(math.log(tau))), max(high, symlog(upper))
        marks = [
            _vline(symlog(math.log(tau)), f"catastrophic: ρ < {short(tau)}", FAIL),
            _vline(symlog(lower), f"ρ outside [{RATIO_BAND[0]:g}, {RATIO_BAND[1]:g}]", WARN),
            _vline(symlog(upper), "", WARN),
        ]
        layout = _histogram_layout(
            "ℓ = log π_train − log π_rollout (signed log scale)",
            "tokens",
            low,
            high,
            marks,
            max(bar_trace["y"]),
            height=310,
        )
        charts.append(
            Chart(
                "hist-token",
                "Token log-ratios",
                "Each valid token's ℓ. A healthy dump is a narrow spike around 0; a tail to the left "
                "means tokens the trainer finds far less likely than the rollout engine did.",
                plotly_figure([bar_trace, *_legend(marks)], layout),
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
        geo = geo_band()
        low, high = min(low, symlog(lower)), max(high, symlog(upper))
        marks = [
            _vline(symlog(lower), f"∏ρ outside [{RATIO_BAND[0]:g}, {RATIO_BAND[1]:g}]", PURPLE),
            _vline(symlog(upper), "", PURPLE),
            _vline(symlog(-geo), f"geometric mean outside ±{100 * geo:.2g}%", TEAL),
            _vline(symlog(geo), "", TEAL),
        ]
        layout = _histogram_layout(
            "per-sequence log-ratio (signed log scale)",
            "sequences",
            low,
            high,
            marks,
            max(max(trace["y"]) for trace in seq_traces),
            height=330,
            barmode="overlay",
        )
        charts.append(
            Chart(
                "hist-seq",
                "Sequence log-ratios",
                "Purple: Σℓ, the log of the sequence-level IS ratio (outside the purple lines, "
                "decoupled_seq_is_rs rejects). Teal: mean ℓ, what geometric-mean rejection filters "
                "(outside the teal lines, decoupled_geo_rs rejects).",
                plotly_figure([*seq_traces, *_legend(marks)], layout),
            )
        )
    return charts
