"""The reference values the report's charts draw, with their names: every one read from where it is
written once — the registry's bands and marks, the presets' thresholds, the recommendation's limits.

:func:`references` gives a metric's lines (each band of the registry, then its reference marks);
:func:`shading` the healthy and watch ranges a chart may shade.
"""

from __future__ import annotations

import math
from dataclasses import dataclass

from rcdiag.assess.findings import ADVICE_LIMITS
from rcdiag.assess.wording import band_label, first_band
from rcdiag.correction.presets import PRESETS
from rcdiag.metrics.records import LOG_PPL_ABS_DIFF, REGISTRY

KEEP_TARGET = ADVICE_LIMITS["keep_target"]
"""The share of tokens a rejection threshold must keep (the sweep charts' reference line)."""
RATIO_BAND = (0.5, 2.0)
"""The ρ band of the ``rcdiag/ratio_outside_0.5_2`` metric."""


def geo_band() -> float:
    """log of the upper bound of ``decoupled_geo_rs``'s geometric-mean band (``0.999_1.001``)."""
    threshold = str(PRESETS["latest"]["decoupled_geo_rs"].config["rollout_rs_threshold"])
    return math.log(float(threshold.split("_")[-1]))


@dataclass(frozen=True)
class Reference:
    """A horizontal line on a chart: value, legend name, status (``reference`` for a mark)."""

    value: float
    label: str
    status: str
    mirrored: bool = False
    """Also drawn at −value (a limit on |value|)."""


def references(metric: str) -> list[Reference]:
    """The lines of ``metric``: its registry bands, then its gauge marks (none outside the
    registry, except the geometric-mean band of ``log_ppl_abs_diff``)."""
    if metric == LOG_PPL_ABS_DIFF.name:
        band = geo_band()
        return [Reference(band, f"decoupled_geo_rs band ±{100 * band:.2g}%", "watch")]
    record = REGISTRY.get(metric)
    if record is None:
        return []
    lines = [
        Reference(float(b.limit), band_label(metric, b), b.status, record.worse == "abs")
        for b in record.bands
        if isinstance(b.limit, float)
    ]
    limits = {r.value for r in lines}
    if record.gauge is not None:
        lines += [
            Reference(at, label, "reference")
            for at, label in record.gauge.marks
            if at not in limits
        ]
    return lines


def shading(metric: str) -> list[tuple[float | None, float | None, str]]:
    """(low, high, status) of the healthy range and the watch band of a ``higher``-worse metric
    (None: the axis end)."""
    record = REGISTRY.get(metric)
    if record is None or not record.bands or record.worse != "higher":
        return []
    healthy = first_band(record)
    assert isinstance(healthy.limit, float)
    out: list[tuple[float | None, float | None, str]] = [(None, healthy.limit, "healthy")]
    act = record.band("act")
    if healthy.status == "watch" and act is not None and isinstance(act.limit, float):
        out.append((healthy.limit, act.limit, "watch"))
    return out
