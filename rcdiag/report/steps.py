"""Per-step series for the trend charts: every step up to :data:`MAX_TREND_POINTS` steps, else at
most :data:`TREND_BUCKETS` buckets of consecutive steps (mean line, min–max band)."""

from __future__ import annotations

import math
from collections.abc import Mapping, Sequence
from typing import Any

import numpy as np

from rcdiag.metrics.ragged import F64, I64
from rcdiag.report.figures import Trace, scatter, translucent

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


def _traces(x: I64, y: F64, size: int, name: str, color: str) -> list[Trace]:
    """The mean line, preceded (for buckets) by the min–max band: upper edge, then lower edge
    filled up to it."""
    middle, mean, low, high = bucketed(x, y, size)
    line = scatter(
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
        scatter(**edge, y=high.tolist(), name=f"{name} max", showlegend=False),
        scatter(
            **edge,
            y=low.tolist(),
            name=f"{name} min",
            showlegend=False,
            fill="tonexty",
            fillcolor=translucent(color, 0.2),
        ),
        line,
    ]
