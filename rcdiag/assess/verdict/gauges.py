"""Gauges: where a deciding figure sits among its metric's published ranges (the verdict's
``deciding``), drawn from the metric's record (:mod:`rcdiag.metrics.records`)."""

from __future__ import annotations

import math
from dataclasses import dataclass
from typing import Literal

from rcdiag.assess.wording import status_of, status_phrase
from rcdiag.formatting import pct, short
from rcdiag.metrics.records import REGISTRY
from rcdiag.model.advice import Gauge


@dataclass(frozen=True)
class GaugeBand:
    """Values below ``upto`` (and above the previous band) have this status and meaning."""

    upto: float
    status: Literal["ok", "warn", "fail"]
    label: str


@dataclass(frozen=True)
class GaugeScale:
    """A gauge: where a value sits among published ranges."""

    label: str
    log: bool
    lo: float
    hi: float
    bands: tuple[GaugeBand, ...]
    markers: tuple[tuple[float, str], ...] = ()
    source: str = ""


INF = math.inf
CSS_STATUS: dict[str, Literal["ok", "warn", "fail"]] = {
    "healthy": "ok",
    "watch": "warn",
    "act": "fail",
}
"""The page's colour classes of the registry's statuses."""


def scale(metric: str) -> GaugeScale:
    """The gauge of ``metric``: its registry record's bands as contiguous ranges.

    Example:
        >>> from rcdiag.metrics.records import K3_KL
        >>> [(b.upto, b.status) for b in scale(K3_KL.name).bands]
        [(0.001, 'ok'), (0.1, 'warn'), (inf, 'fail')]
    """
    record = REGISTRY[metric]
    assert record.gauge is not None, metric
    bands: list[GaugeBand] = []
    below = "healthy"
    for band in sorted(record.bands, key=lambda b: b.limit):
        assert isinstance(band.limit, float)
        bands.append(GaugeBand(band.limit, CSS_STATUS[below], f"{below}: ≤ {short(band.limit)}"))
        below = band.status
    last = record.bands[-1]
    bands.append(GaugeBand(INF, CSS_STATUS[below], f"{below} — {last.source}"))
    return GaugeScale(
        record.label,
        record.gauge.log,
        record.gauge.lo,
        record.gauge.hi,
        tuple(bands),
        record.gauge.marks,
        "; ".join(b.source for b in record.bands),
    )


def gauge(metric: str, value: float | None, caption: str) -> Gauge:
    """Where ``value`` sits on the published ranges of ``metric`` (its registry record)."""
    gauge_scale = scale(metric)
    shown = abs(value) if value is not None and REGISTRY[metric].worse == "abs" else value
    status = status_of(metric, value)
    band = None
    if shown is not None:
        band = next(b for b in gauge_scale.bands if shown <= b.upto or b.upto == INF)
    return Gauge(
        metric=metric,
        label=gauge_scale.label,
        caption=caption,
        value=shown,
        display=pct(shown) if REGISTRY[metric].share else short(shown),
        status=CSS_STATUS[status] if status else (band.status if band else None),
        band=f"{status}: {status_phrase(metric, status)}" if status else None,
        source=gauge_scale.source,
        scale={
            "log": gauge_scale.log,
            "lo": gauge_scale.lo,
            "hi": gauge_scale.hi,
            "bands": [
                {"upto": None if b.upto == INF else b.upto, "status": b.status, "label": b.label}
                for b in gauge_scale.bands
            ],
            "markers": [{"at": at, "label": label} for at, label in gauge_scale.markers],
        },
    )
