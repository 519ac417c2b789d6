"""The report's per-step charts: headline metrics over training steps, with published thresholds.

Up to :data:`MAX_TREND_POINTS` steps every step is a point. A longer run is drawn in at most
:data:`TREND_BUCKETS` buckets of ``size`` consecutive steps (:func:`bucket_size`): per bucket, a line
through the mean of its steps' values at its middle step, and a band from their minimum to their
maximum, so a spike in one step still shows. The page says so (:func:`steps_note`). The chart data
then grows with the number of buckets, not of steps: a 10,000-step report is as small as a
1,000-step one.
"""

from __future__ import annotations

import math
from collections.abc import Mapping, Sequence
from typing import Any

import numpy as np
import plotly.graph_objects as go

from rcdiag.metrics.ragged import F64, I64
from rcdiag.report.figures import (
    BAND_OK,
    BAND_WARN,
    BLUE,
    FAIL,
    GEO_DEFAULT,
    OK,
    ORANGE,
    PURPLE,
    WARN,
    Chart,
    base_layout,
    plotly_figure,
    threshold_line,
)

MAX_TREND_POINTS = 400
"""Runs of up to this many steps draw every step."""
TREND_BUCKETS = 150
"""Longer runs are drawn in at most this many buckets of consecutive steps."""


def bucket_size(steps: int) -> int:
    """Consecutive steps per point: 1 up to :data:`MAX_TREND_POINTS` steps, else the fewest that
    make at most :data:`TREND_BUCKETS` buckets.

    Example:
        >>> bucket_size(400), bucket_size(1_000), bucket_size(10_000)
        (1, 7, 67)
    """
    return 1 if steps <= MAX_TREND_POINTS else math.ceil(steps / TREND_BUCKETS)


def steps_note(steps: int) -> str:
    """What a point of the per-step charts is, for the page.

    Example:
        >>> what, how = steps_note(12_000).split(": ")
        >>> what
        '12,000 steps shown as 150 buckets of 80 consecutive steps'
        >>> how
        'line = mean, band = min–max of the steps in each bucket.'
    """
    size = bucket_size(steps)
    if size == 1:
        return "Each point is one training step (one verl batch)."
    last = " (the last has fewer)" if steps % size else ""
    return (
        f"{steps:,} steps shown as {math.ceil(steps / size):,} buckets of {size} consecutive "
        f"steps{last}: line = mean, band = min–max of the steps in each bucket."
    )


def bucketed(x: I64, y: F64, size: int) -> tuple[I64, F64, F64, F64]:
    """Per bucket of ``size`` consecutive entries: its middle x, and the mean, minimum and maximum
    of its finite y (NaN when it has none).

    Example:
        >>> b = bucketed(np.arange(5), np.array([1.0, 3.0, np.nan, 2.0, 8.0]), 2)
        >>> [a.tolist() for a in b]
        [[0, 2, 4], [2.0, 2.0, 8.0], [1.0, 2.0, 8.0], [3.0, 2.0, 8.0]]
    """
    starts = np.arange(0, y.size, size)
    lengths = np.diff(np.append(starts, y.size))
    finite = np.isfinite(y)
    count = np.add.reduceat(finite.astype(np.int64), starts)
    total = np.add.reduceat(np.where(finite, y, 0.0), starts)
    mean = np.divide(total, count, out=np.full(starts.size, np.nan), where=count > 0)
    clean = np.where(finite, y, np.nan)
    return (
        x[starts + (lengths - 1) // 2],
        mean,
        np.fmin.reduceat(clean, starts),
        np.fmax.reduceat(clean, starts),
    )


def _step_values(steps: Sequence[Mapping[str, Any]], metric: str) -> F64:
    values = [(s.get("metrics") or {}).get(metric) for s in steps]
    return np.array(
        [v if isinstance(v, (int, float)) else math.nan for v in values], dtype=np.float64
    )


def _translucent(color: str, alpha: float) -> str:
    """``#rrggbb`` as ``rgba(r,g,b,alpha)``."""
    r, g, b = (int(color[i : i + 2], 16) for i in (1, 3, 5))
    return f"rgba({r},{g},{b},{alpha})"


def _traces(x: I64, y: F64, size: int, name: str, color: str) -> list[go.Scatter]:
    """The mean line, preceded (for buckets) by the min–max band: upper edge, then lower edge
    filled up to it."""
    middle, mean, low, high = bucketed(x, y, size)
    line = go.Scatter(
        x=middle.tolist(),
        y=mean.tolist(),
        name=name if size == 1 else f"{name} (mean)",
        mode="lines+markers" if middle.size <= 60 else "lines",
        line={"color": color, "width": 2},
        marker={"size": 5},
        connectgaps=False,
    )
    if size == 1:
        return [line]
    edge = {"x": middle.tolist(), "mode": "lines", "line": {"width": 0, "color": color}}
    return [
        go.Scatter(**edge, y=high.tolist(), name=f"{name} max", showlegend=False),
        go.Scatter(
            **edge,
            y=low.tolist(),
            name=f"{name} min",
            showlegend=False,
            fill="tonexty",
            fillcolor=_translucent(color, 0.2),
        ),
        line,
    ]


def _band(y0: float, y1: float, color: str) -> dict[str, Any]:
    return {
        "type": "rect",
        "xref": "paper",
        "x0": 0,
        "x1": 1,
        "yref": "y",
        "y0": y0,
        "y1": y1,
        "fillcolor": color,
        "line": {"width": 0},
        "layer": "below",
    }


def _thresholds(
    top: float, lines: Sequence[tuple[float, str, str]], log: bool
) -> tuple[list[dict], list[dict]]:
    """Threshold lines; on a linear axis a threshold far above the data (whose largest |value| is
    ``top``) becomes a caption instead."""
    shapes, notes = [], []
    for y, label, color in lines:
        if not log and top > 0 and abs(y) > 10 * top:
            notes.append(
                {
                    "xref": "paper",
                    "x": 0.01,
                    "xanchor": "left",
                    "yref": "paper",
                    "y": 1,
                    "yanchor": "top",
                    "bgcolor": "rgba(255,255,255,0.75)",
                    "text": f"{label} — off the chart, far above every step",
                    "showarrow": False,
                    "font": {"size": 10, "color": color},
                }
            )
            continue
        shape, note = threshold_line(y, label, color, log=log)
        shapes.append(shape)
        notes.append(note)
    return shapes, notes


def _trend(
    steps: Sequence[Mapping[str, Any]],
    id: str,
    title: str,
    caption: str,
    series: Sequence[tuple[str, str, str]],
    lines: Sequence[tuple[float, str, str]] = (),
    log: bool = False,
    bands: Sequence[dict[str, Any]] = (),
    y_range: tuple[float, float] | None = None,
) -> Chart | None:
    x = np.array([int(s["step"]) for s in steps], dtype=np.int64)
    size = bucket_size(x.size)
    traces: list[go.Scatter] = []
    drawn: list[F64] = []
    for metric, name, color in series:
        y = _step_values(steps, metric)
        hidden = ~np.isfinite(y)
        if log:
            hidden |= y <= 0
        y[hidden] = np.nan
        if np.isnan(y).all():
            continue
        drawn.append(y[~np.isnan(y)])
        traces += _traces(x, y, size, name, color)
    if not drawn:
        return None
    values = np.concatenate(drawn)
    shapes, notes = _thresholds(float(np.abs(values).max()), lines, log)
    yaxis: dict[str, Any] = {"type": "log" if log else "linear", "exponentformat": "power"}
    if y_range is not None:
        yaxis["range"] = list(y_range)
    elif log:
        positive = [y for y, _, _ in lines if y > 0]
        low = min([float(values.min()), *positive])
        high = max([float(values.max()), *positive])
        yaxis["range"] = [math.log10(low) - 0.3, math.log10(high) + 0.3]
    layout = base_layout(
        xaxis={"title": {"text": "training step"}},
        yaxis=yaxis,
        shapes=[*bands, *shapes],
        annotations=notes,
        showlegend=len(drawn) > 1,
    )
    return Chart(id, title, caption, plotly_figure(traces, layout))


def trend_charts(document: Mapping[str, Any]) -> list[Chart]:
    """Per-step trends of the headline metrics, with the published thresholds (none with fewer
    than two steps)."""
    steps = document.get("steps") or []
    if len(steps) < 2:
        return []
    charts = [
        _trend(
            steps,
            "trend-k3",
            "k3_kl per step",
            "Token-level KL(π_rollout‖π_train), K3 estimator. Green: dense bf16 models "
            "(1e-5 … 1e-3); amber: MoE models (1e-3 … 1e-1).",
            [("rollout_corr/k3_kl", "k3_kl", BLUE)],
            [(1e-3, "NeMo-RL gate 1e-3", WARN), (1e-1, "top of MoE range", FAIL)],
            log=True,
            bands=[_band(1e-5, 1e-3, BAND_OK), _band(1e-3, 1e-1, BAND_WARN)],
        ),
        _trend(
            steps,
            "trend-abs",
            "mean |Δ log p| per step",
            "Mean |log π_train − log π_rollout| over tokens. Healthy bf16 ≈ 0.01, fp8 rollout ≈ "
            "0.27; slime gates CI at 0.1.",
            [("rcdiag/abs_log_ratio_mean", "mean |Δ log p|", BLUE)],
            [(0.1, "slime gate 0.1", FAIL), (0.01, "healthy bf16 ≈ 0.01", OK)],
            log=True,
        ),
        _trend(
            steps,
            "trend-kl",
            "kl per step",
            "Mean of log π_rollout − log π_train (signed): > 0 when the rollout engine is "
            "over-confident. verl flags |kl| > 0.1.",
            [("rollout_corr/kl", "kl", BLUE)],
            [(0.1, "verl: |kl| > 0.1", FAIL), (-0.1, "verl: |kl| > 0.1", FAIL)],
        ),
        _trend(
            steps,
            "trend-logppl",
            "log_ppl_abs_diff per step",
            "Mean over sequences of |mean token Δ log p| — the statistic geometric-mean rejection "
            "filters. Above the dashed line, decoupled_geo_rs (±0.1%) rejects most sequences.",
            [("rollout_corr/log_ppl_abs_diff", "log_ppl_abs_diff", BLUE)],
            [(GEO_DEFAULT, "decoupled_geo_rs band ±0.1%", WARN)],
            log=True,
        ),
        _trend(
            steps,
            "trend-chi2-token",
            "chi2_token per step",
            "Variance of the token weights ρ = π_train/π_rollout (E[ρ²] − 1). verl: > 1 is severe.",
            [("rollout_corr/chi2_token", "chi2_token", BLUE)],
            [(1.0, "verl: severe > 1", FAIL)],
        ),
        _trend(
            steps,
            "trend-chi2-seq",
            "chi2_seq per step",
            "Variance of the sequence weights ∏ρ. Grows with response length; > 1 means "
            "sequence-level IS is unreliable (rcdiag rule).",
            [("rollout_corr/chi2_seq", "chi2_seq", PURPLE)],
            [(1.0, "> 1: sequence IS unreliable", FAIL)],
        ),
        _trend(
            steps,
            "trend-ess",
            "Effective sample size per step",
            "Kish ESS of the raw weights, as a share of the samples: token weights and sequence "
            "weights. verl warns below 0.3.",
            [("rcdiag/ess_token", "ESS token", BLUE), ("rcdiag/ess_seq", "ESS sequence", PURPLE)],
            [(0.3, "verl: < 0.3", FAIL)],
            y_range=(0, 1.05),
        ),
        _trend(
            steps,
            "trend-veto",
            "Sequences with a catastrophic token",
            "Share of sequences holding a token with π_train/π_rollout < 1e-4 (the veto). verl "
            "warns above 10%.",
            [("rcdiag/veto_fraction", "veto fraction", ORANGE)],
            [(0.1, "verl: > 10%", FAIL)],
        ),
    ]
    return [c for c in charts if c is not None]
