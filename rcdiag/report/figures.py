"""What every chart of the report shares: the :class:`Chart`, the layout, reference lines, axes.

Figures are built from a result document only (no I/O, no HTML, no decision: thresholds and their
names come from :mod:`rcdiag.assess`). Numbers are rounded to :data:`SIGNIFICANT` digits. The charts
themselves are in :mod:`rcdiag.report.trends` (per step), :mod:`rcdiag.report.histograms`,
:mod:`rcdiag.report.buckets` (where the mismatch lives) and :mod:`rcdiag.report.sweeps`.

Reference lines (published thresholds) are drawn as dashed traces named in the legend, never as
labels over the plot, so no label hides data; a threshold far outside the data is not drawn and the
chart's ``notes`` say so under its title.
"""

from __future__ import annotations

import math
from collections.abc import Sequence
from dataclasses import dataclass, field
from typing import Any

SIGNIFICANT = 4

FONT = '-apple-system, BlinkMacSystemFont, "Segoe UI", Roboto, "Helvetica Neue", Arial, sans-serif'
INK, MUTED, GRID = "#1f2937", "#6b7280", "#e5e7eb"
BLUE, TEAL, PURPLE, ORANGE = "#2563eb", "#0d9488", "#7c3aed", "#ea580c"
OK, WARN, FAIL = "#15803d", "#b45309", "#b91c1c"
BAND_OK, BAND_WARN = "rgba(21,128,61,0.07)", "rgba(180,83,9,0.08)"
STATUS_COLORS = {"healthy": OK, "watch": WARN, "act": FAIL}
"""The colour of a registry status on the charts."""

HEADROOM = 1.12
"""Linear axes end this far above the largest value, so no point sits on the plot edge."""


@dataclass(frozen=True)
class Chart:
    """One figure of the report; ``notes`` are printed under its title (e.g. a threshold not drawn)."""

    id: str
    title: str
    caption: str
    figure: dict[str, Any]
    notes: tuple[str, ...] = field(default=())


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
    """The report's plotly layout; a legend sits above the plot, never over it."""
    base: dict[str, Any] = {
        "font": {"family": FONT, "size": 12, "color": INK},
        "paper_bgcolor": "white",
        "plot_bgcolor": "white",
        "margin": {"l": 60, "r": 20, "t": 10, "b": 45},
        "height": 280,
        "showlegend": False,
        "hovermode": "x unified",
        "legend": {
            "orientation": "h",
            "y": 1.02,
            "yanchor": "bottom",
            "x": 0,
            "font": {"size": 11},
        },
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


Trace = dict[str, Any]
"""A plotly.js trace: its ``type`` and attributes, as plotly.js reads them (plotly.js's own schema;
tests/test_report_figures.py validates every figure of the sample dumps against plotly's)."""


def scatter(**attributes: Any) -> Trace:
    """A ``scatter`` trace (lines and/or markers)."""
    return {"type": "scatter", **attributes}


def bar(**attributes: Any) -> Trace:
    """A ``bar`` trace."""
    return {"type": "bar", **attributes}


def plotly_figure(data: Sequence[Trace], layout: dict[str, Any]) -> dict[str, Any]:
    """The figure as plotly.js draws it (``Plotly.newPlot(div, data, layout)``), rounded."""
    return _round({"data": list(data), "layout": layout})


def reference_line(
    x: Sequence[Any], y: float, label: str, color: str, dash: str = "dash", legend: bool = True
) -> Trace:
    """A horizontal threshold across ``x[0]`` … ``x[-1]``, named in the legend (``legend=False``:
    a second line of the same threshold, e.g. −0.1 beside 0.1)."""
    return scatter(
        x=[x[0], x[-1]],
        y=[y, y],
        name=label,
        legendgroup=label,
        showlegend=legend,
        mode="lines",
        line={"color": color, "width": 1.5, "dash": dash},
        hoverinfo="skip",
    )


def nice_step(span: float, ticks: int = 5) -> float:
    """A 1-2-2.5-5 × 10ᵏ step giving about ``ticks`` intervals over ``span``.

    Example:
        >>> nice_step(0.0095), nice_step(1.0), nice_step(6000.0)
        (0.002, 0.2, 2000.0)
    """
    if span <= 0 or not math.isfinite(span):
        return 1.0
    raw = span / ticks
    magnitude = 10.0 ** math.floor(math.log10(raw))
    for mult in (1.0, 2.0, 2.5, 5.0, 10.0):
        if raw <= mult * magnitude * (1 + 1e-9):
            return mult * magnitude
    return 10.0 * magnitude


def nice_ticks(top: float, ticks: int = 5) -> list[float]:
    """Round tick values from 0 to the first round value ≥ ``top``.

    Example:
        >>> nice_ticks(0.0095)
        [0.0, 0.002, 0.004, 0.006, 0.008, 0.01]
    """
    step = nice_step(top, ticks)
    count = max(1, math.ceil(top / step - 1e-9))
    return [float(f"{i * step:.12g}") for i in range(count + 1)]


def percent_label(share: float) -> str:
    """A tick label of a share: ``0.25%``, ``1%``, ``12.5%``, ``0.00002%`` (decimals, no float
    noise, never scientific).

    Example:
        >>> [percent_label(v) for v in (0.0, 0.0025, 0.01, 0.125, 2e-7)]
        ['0%', '0.25%', '1%', '12.5%', '0.00002%']
    """
    text = f"{float(f'{100.0 * share:.6g}'):.10f}".rstrip("0").rstrip(".")
    return f"{text or '0'}%"


def log_ticks(values: Sequence[float]) -> dict[str, Any]:
    """A log axis ticked at the given values (e.g. a sweep's grid), labelled as written.

    Example:
        >>> log_ticks([1.5, 2.0, 100.0])["ticktext"]
        ['1.5', '2', '100']
    """
    shown = sorted({float(v) for v in values if v > 0})
    return {"type": "log", "tickvals": shown, "ticktext": [f"{v:g}" for v in shown]}


def translucent(color: str, alpha: float) -> str:
    """``#rrggbb`` as ``rgba(r,g,b,alpha)``."""
    r, g, b = (int(color[i : i + 2], 16) for i in (1, 3, 5))
    return f"rgba({r},{g},{b},{alpha})"
