"""The words of every judgement rcdiag prints: one source, read from the registry's statuses.

A metric is *healthy*, *watch* or *act* (:mod:`rcdiag.assess.judge`) and is said so in one way
everywhere — the verdict, the reasons of the recommendation, the report's cards, gauges and chart
legends:

* healthy: ``k3_kl = 4.5e-4 overall, within the healthy range (≤ 0.001)``;
* watch: ``k3_kl = 0.015 over the last steps, past the healthy range (> 0.001, NeMo-RL gate)``;
* act: ``mean |Δ log p| = 0.27 overall, past the act limit (> 0.1, slime gate)``.

The size of the per-token mismatch is *small*, *moderate* or *large* (:data:`SIZE_WORDS`): small only
when every per-token figure it cites is healthy, large only when one is past its act limit. Every
sentence says which figure it reads — ``overall`` (the whole dump) or ``over the last steps`` — so
two sentences about the same figure never disagree. Rule and cause ids never appear in these words.
"""

from __future__ import annotations

from rcdiag.formatting import pct, short
from rcdiag.metrics.records import REGISTRY, Band, MetricRecord, is_share, label
from rcdiag.status import Status

SIZE_WORDS: dict[str, str] = {"tiny": "small", "moderate": "moderate", "large": "large"}
"""The size of the per-token mismatch (:attr:`rcdiag.assess.findings.Findings.size`) in words."""

OVERALL = "overall"
RECENT = "over the last steps"


def symbol(metric: str) -> str:
    """The name of ``metric`` in a sentence: its record's label (``k3_kl``, ``mean |Δ log p|``)."""
    return label(metric)


def value_text(metric: str, value: float | None) -> str:
    """A metric's value as sentences print it (shares as percentages)."""
    return pct(value) if is_share(metric) else short(value)


def _limit(record: MetricRecord, band: Band, inside: bool, named: bool = False) -> str:
    """``≤ 0.001`` (inside the band's limit) or ``> 0.001`` (past it), in the record's direction;
    ``named`` adds the limit's short name (``> 0.001, NeMo-RL gate``)."""
    assert isinstance(band.limit, float), record.name
    shown = pct(band.limit, 0) if record.share else short(band.limit)
    lower = record.worse == "lower"
    op = ("≥" if lower else "≤") if inside else ("<" if lower else ">")
    name = f"|{symbol(record.name)}| " if record.worse == "abs" else ""
    suffix = f", {band.name}" if named and band.name else ""
    return f"{name}{op} {shown}{suffix}"


def first_band(record: MetricRecord) -> Band:
    """The band a healthy value stays inside (the least severe one)."""
    return min(record.bands, key=lambda b: 0 if b.status == "watch" else 1)


def status_phrase(metric: str, status: Status) -> str:
    """``within the healthy range (≤ 0.001)``, ``past the healthy range (> 0.001)`` or ``past the act
    limit (> 0.1)``.

    Example:
        >>> from rcdiag.metrics.records import K3_KL
        >>> status_phrase(K3_KL.name, "watch")
        'past the healthy range (> 0.001, NeMo-RL gate)'
        >>> status_phrase("rcdiag/ess_seq", "healthy")
        'within the healthy range (≥ 0.5)'
    """
    record = REGISTRY[metric]
    if status == "healthy":
        return f"within the healthy range ({_limit(record, first_band(record), True)})"
    band = record.band(status)
    assert band is not None, (metric, status)
    if status == "watch":
        return f"past the healthy range ({_limit(record, band, False, True)})"
    return f"past the act limit ({_limit(record, band, False, True)})"


def status_of(metric: str, value: float | None) -> Status | None:
    """The registry status of ``value`` (None for a metric outside the registry or no value)."""
    record = REGISTRY.get(metric)
    return None if record is None else record.status(value)


def judged(
    metric: str, value: float | None, scope: str = OVERALL, overall: float | None = None
) -> str:
    """``k3_kl = 0.015 over the last steps (overall 0.0066), past the healthy range (> 0.001)``.

    ``scope``: :data:`OVERALL` or :data:`RECENT`; ``overall`` is quoted beside a recent value.

    Example:
        >>> judged("rcdiag/abs_log_ratio_mean", 0.27)
        'mean |Δ log p| = 0.27 overall, past the act limit (> 0.1, slime gate)'
    """
    where = scope
    if scope == RECENT and overall is not None:
        where = f"{RECENT} (overall {value_text(metric, overall)})"
    text = f"{symbol(metric)} = {value_text(metric, value)} {where}"
    record = REGISTRY.get(metric)
    if record is not None and record.negative_judged_by and value is not None and value < 0:
        companion = label(record.negative_judged_by)
        return f"{text} (below 0: the sampled weights average under 1; {companion} tells how badly)"
    status = status_of(metric, value)
    return text if status is None else f"{text}, {status_phrase(metric, status)}"


def band_label(metric: str, band: Band) -> str:
    """A band as a chart legend names it: ``watch > 0.001 · NeMo-RL gate``.

    Example:
        >>> from rcdiag.metrics.records import KL
        >>> band_label(KL.name, KL.bands[-1])
        'act |kl| > 0.1 · verl'
    """
    record = REGISTRY[metric]
    name = f" · {band.name}" if band.name else ""
    return f"{band.status} {_limit(record, band, False)}{name}"


def ranges_text(metric: str) -> str:
    """Every band of ``metric`` in one line: ``healthy ≤ 0.001 · watch > 0.001 · act > 0.1``."""
    record = REGISTRY[metric]
    parts = [f"healthy {_limit(record, first_band(record), True)}"]
    for band in sorted(record.bands, key=lambda b: b.status != "watch"):
        if isinstance(band.limit, float):
            parts.append(f"{band.status} {_limit(record, band, False)}")
    return " · ".join(parts)


STATUS_WORDS: dict[str, str] = {"healthy": "Healthy", "watch": "Watch", "act": "Act"}
"""The verdict's word on the page."""
