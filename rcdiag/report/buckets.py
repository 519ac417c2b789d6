"""Where the mismatch lives: mean |ℓ| by rollout probability, by position and by response length.

Bars are lengths: their axis is linear from 0, ending :data:`~rcdiag.report.figures.HEADROOM` above
the tallest bar; a second series (share of tokens, or mean |Σℓ| per sequence) is a line on the
right axis.
"""

from __future__ import annotations

import math
from collections.abc import Mapping
from typing import Any

from rcdiag.formatting import short
from rcdiag.report.figures import (
    BLUE,
    HEADROOM,
    MUTED,
    PURPLE,
    Chart,
    Trace,
    bar,
    base_layout,
    plotly_figure,
    scatter,
)


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
    traces: list[Trace] = [
        bar(
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
            scatter(
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
