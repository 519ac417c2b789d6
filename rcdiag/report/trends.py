"""The report's per-step charts: headline metrics over training steps, with published thresholds.

Up to :data:`MAX_TREND_POINTS` steps every step is a point. A longer run is drawn in at most
:data:`TREND_BUCKETS` buckets of ``size`` consecutive steps (:func:`bucket_size`): per bucket, a line
through the mean of its steps' values at its middle step, and a band from their minimum to their
maximum, so a spike in one step still shows. The page says so (:func:`steps_note`). The chart data
then grows with the number of buckets, not of steps: a 10,000-step report is as small as a
1,000-step one.

The thresholds drawn are the registry's bands and marks (:func:`rcdiag.assess.references.references`),
named in the legend. A linear axis spans the data and the thresholds near it with headroom; a
threshold more than ten times beyond every step is left out and named under the chart; a spike that
would flatten the rest (more than :data:`SPIKE_RATIO` times the typical range) is cut at the top of
the axis, its steps marked ▲ there and named under the chart.
"""

from __future__ import annotations

import math
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, replace
from typing import Any

import numpy as np

from rcdiag.assess.references import Reference, references, shading
from rcdiag.formatting import count, short
from rcdiag.metrics.distributions import quantiles
from rcdiag.metrics.ragged import F64, I64
from rcdiag.metrics.records import (
    ABS_LOG_RATIO_MEAN,
    CHI2_SEQ,
    CHI2_TOKEN,
    ESS_SEQ,
    ESS_TOKEN,
    K3_KL,
    KL,
    LOG_PPL_ABS_DIFF,
    VETO_FRACTION,
    MetricRecord,
)
from rcdiag.report.figures import (
    BAND_OK,
    BAND_WARN,
    BLUE,
    HEADROOM,
    MUTED,
    ORANGE,
    PURPLE,
    STATUS_COLORS,
    Chart,
    Trace,
    base_layout,
    plotly_figure,
    reference_line,
    scatter,
)
from rcdiag.report.steps import (
    MAX_TREND_POINTS,
    TREND_BUCKETS,
    _step_values,
    _traces,
    bucket_size,
    bucketed,
    steps_note,
)

SPIKE_RATIO = 10.0
"""A linear axis is cut when the data's full range is this many times its typical range."""
FAR = 10.0
"""A threshold more than this many times beyond every step is named, not drawn (linear axes)."""


@dataclass(frozen=True)
class Series:
    """One metric of a trend chart and its colour (the legend names it by its record's label)."""

    record: MetricRecord
    color: str

    @property
    def metric(self) -> str:
        return self.record.name

    @property
    def name(self) -> str:
        return self.record.label


@dataclass(frozen=True)
class Axis:
    """How a trend chart's y axis is drawn: log, fixed range, or linear from a floor."""

    log: bool = False
    fixed: tuple[float, float] | None = None
    floor: float | None = None
    """A lower end the data cannot go below (0 for shares)."""


def _far(ref: Reference, low: float, high: float) -> bool:
    """Whether a threshold lies more than :data:`FAR` times beyond the data (linear axes)."""
    top = max(abs(low), abs(high))
    return top > 0 and abs(ref.value) > FAR * top


def _spike_cut(values: F64, low: float, refs: Sequence[float]) -> float | None:
    """The top of a linear axis that a few spikes would otherwise flatten, or None."""
    typical = max([*quantiles(values, [0.95]), *refs])
    high = float(values.max())
    if typical <= low or high - low <= SPIKE_RATIO * (typical - low):
        return None
    return typical + 0.35 * (typical - low)


def _range(low: float, high: float, floor: float | None) -> list[float]:
    """[low, high] with headroom on both sides (none below ``floor`` when the data sits on it)."""
    span = high - low or max(abs(high), 1e-12)
    bottom = low - 0.08 * span
    if floor is not None and low >= floor:
        bottom = max(floor, bottom) if low > floor else floor - 0.04 * span
    return [bottom, high + (HEADROOM - 1.0) * span]


def _reference_traces(
    x: Sequence[int], refs: Sequence[Reference], colors: Mapping[str, str]
) -> list[Trace]:
    """Each threshold as a named dashed line (in its series' colour when a chart has several)."""
    traces = []
    for ref in refs:
        color = colors.get(ref.label) or STATUS_COLORS.get(ref.status, MUTED)
        dash = "dot" if ref.status == "reference" else "dash"
        traces.append(reference_line(x, ref.value, ref.label, color, dash))
        if ref.mirrored:
            traces.append(reference_line(x, -ref.value, ref.label, color, dash, legend=False))
    return traces


def _shading(metric: str, log: bool) -> list[dict[str, Any]]:
    shapes = []
    for low, high, status in shading(metric):
        if not log:
            continue
        shapes.append(
            {
                "type": "rect",
                "xref": "paper",
                "x0": 0,
                "x1": 1,
                "yref": "y",
                "y0": low if low is not None else 1e-12,
                "y1": high,
                "fillcolor": BAND_OK if status == "healthy" else BAND_WARN,
                "line": {"width": 0},
                "layer": "below",
            }
        )
    return shapes


def _trend(
    steps: Sequence[Mapping[str, Any]],
    id: str,
    title: str,
    caption: str,
    series: Sequence[Series],
    axis: Axis = Axis(),
) -> Chart | None:
    x = np.array([int(s["step"]) for s in steps], dtype=np.int64)
    size = bucket_size(x.size)
    traces: list[Trace] = []
    tops: list[tuple[I64, F64, str]] = []
    drawn: list[F64] = []
    for s in series:
        y = _step_values(steps, s.metric)
        hidden = ~np.isfinite(y)
        if axis.log:
            hidden |= y <= 0
        y[hidden] = np.nan
        if np.isnan(y).all():
            continue
        drawn.append(y[~np.isnan(y)])
        traces += _traces(x, y, size, s.name, s.color)
        middle, mean, _, upper = bucketed(x, y, size)
        tops.append((middle, upper if size > 1 else mean, s.name))
    if not drawn:
        return None
    values = np.concatenate(drawn)
    low, high = float(values.min()), float(values.max())
    refs = [
        replace(r, label=f"{s.name}: {r.label}") if len(series) > 1 else r
        for s in series
        for r in references(s.metric)
    ]
    colors = {r.label: s.color for s in series for r in refs if r.label.startswith(f"{s.name}:")}
    notes: list[str] = []
    yaxis: dict[str, Any] = {"type": "log" if axis.log else "linear", "exponentformat": "power"}
    shapes: list[dict[str, Any]] = []
    if axis.log:
        positive = [r.value for r in refs if r.value > 0]
        bottom, top = min([low, *positive]), max([high, *positive])
        yaxis["range"] = [math.log10(bottom) - 0.3, math.log10(top) + 0.3]
        shapes = _shading(series[0].metric, True)
    else:
        near = [r for r in refs if not _far(r, low, high) and (axis.fixed is None)]
        for r in refs:
            if axis.fixed is None and r not in near:
                notes.append(
                    f"Not drawn: {r.label} — far beyond every step (the largest is {short(high)})."
                )
        if axis.fixed is not None:
            near = [r for r in refs if axis.fixed[0] <= r.value <= axis.fixed[1]]
            yaxis["range"] = list(axis.fixed)
        else:
            levels = [v for r in near for v in ((r.value, -r.value) if r.mirrored else (r.value,))]
            bottom = min([low, *levels])
            cut = _spike_cut(values, bottom, levels)
            top = max([high, *levels]) if cut is None else cut
            yaxis["range"] = _range(bottom, top, axis.floor)
            if cut is not None:
                traces += _cut_markers(tops, cut, yaxis["range"], notes, size)
        refs = near
    x_span = [int(x[0]), int(x[-1])]
    traces += _reference_traces(x_span, refs, colors)
    layout = base_layout(
        xaxis={"title": {"text": "training step"}},
        yaxis=yaxis,
        shapes=shapes,
        showlegend=True,
    )
    return Chart(id, title, caption, plotly_figure(traces, layout), tuple(notes))


def _cut_markers(
    tops: Sequence[tuple[I64, F64, str]],
    cut: float,
    y_range: Sequence[float],
    notes: list[str],
    size: int,
) -> list[Trace]:
    """▲ at the top of the axis for the points beyond ``cut``, and a note naming them."""
    traces = []
    at = y_range[1] - 0.04 * (y_range[1] - y_range[0])
    for middle, top, name in tops:
        over = np.flatnonzero(np.nan_to_num(top, nan=-np.inf) > cut)
        if over.size == 0:
            continue
        worst = int(over[np.argmax(top[over])])
        traces.append(
            scatter(
                x=middle[over].tolist(),
                y=[at] * over.size,
                name=f"{name} above the axis",
                mode="markers",
                marker={"symbol": "triangle-up", "size": 9, "color": MUTED},
                hovertext=[f"{name}: {short(float(v), 3)}" for v in top[over]],
                hoverinfo="text",
                showlegend=False,
            )
        )
        where = "step" if size == 1 else "bucket around step"
        points = "step" if size == 1 else "bucket"
        notes.append(
            f"{count(over.size)} {points}{'s' if over.size > 1 else ''} of {name} above the axis "
            f"(▲), up to {short(float(top[worst]), 3)} at {where} {int(middle[worst])}: the axis "
            "is cut so the other steps stay readable."
        )
    return traces


def trend_charts(document: Mapping[str, Any]) -> list[Chart]:
    """Per-step trends of the headline metrics, with the registry's thresholds (none with fewer
    than two steps)."""
    steps = document.get("steps") or []
    if len(steps) < 2:
        return []
    charts = [
        _trend(
            steps,
            "trend-k3",
            f"{K3_KL.label} per step",
            "Token-level KL(π_rollout‖π_train), K3 estimator. Shaded: the healthy range (green) "
            "and the watch band (amber).",
            [Series(K3_KL, BLUE)],
            Axis(log=True),
        ),
        _trend(
            steps,
            "trend-abs",
            f"{ABS_LOG_RATIO_MEAN.label} per step",
            "Mean |log π_train − log π_rollout| over tokens (healthy bf16 ≈ 0.01, fp8 rollout "
            "≈ 0.27).",
            [Series(ABS_LOG_RATIO_MEAN, BLUE)],
            Axis(log=True),
        ),
        _trend(
            steps,
            "trend-kl",
            f"{KL.label} per step",
            "Mean of log π_rollout − log π_train (signed): > 0 when the rollout engine is "
            "over-confident.",
            [Series(KL, BLUE)],
        ),
        _trend(
            steps,
            "trend-logppl",
            f"{LOG_PPL_ABS_DIFF.label} per step",
            "Mean over sequences of |mean token Δ log p| — the statistic geometric-mean rejection "
            "filters. Above the dashed line, decoupled_geo_rs rejects most sequences.",
            [Series(LOG_PPL_ABS_DIFF, BLUE)],
            Axis(log=True),
        ),
        _trend(
            steps,
            "trend-chi2-token",
            f"{CHI2_TOKEN.label} per step",
            "E[ρ²] − 1 of the token weights ρ = π_train/π_rollout (≈ their variance).",
            [Series(CHI2_TOKEN, BLUE)],
        ),
        _trend(
            steps,
            "trend-chi2-seq",
            f"{CHI2_SEQ.label} per step",
            "E[(∏ρ)²] − 1 of the sequence weights: grows with response length while the weights "
            "are well sampled, and past its healthy range sequence-level IS is unreliable; below 0 "
            "the sampled weights average under 1 — their mass lies in unsampled tails (see ESS).",
            [Series(CHI2_SEQ, PURPLE)],
        ),
        _trend(
            steps,
            "trend-ess",
            "Effective sample size per step",
            "Kish ESS of the raw weights, as a share of the samples: token weights and sequence "
            "weights.",
            [
                Series(ESS_TOKEN, BLUE),
                Series(ESS_SEQ, PURPLE),
            ],
            Axis(fixed=(0.0, 1.05)),
        ),
        _trend(
            steps,
            "trend-veto",
            "Sequences with a catastrophic token",
            "Share of sequences holding a token with π_train/π_rollout below the veto threshold.",
            [Series(VETO_FRACTION, ORANGE)],
            Axis(floor=0.0),
        ),
    ]
    return [c for c in charts if c is not None]


__all__ = [
    "MAX_TREND_POINTS",
    "TREND_BUCKETS",
    "bucket_size",
    "bucketed",
    "steps_note",
    "trend_charts",
]
