"""Healthy / watch / act: the verdict at the top of the report, with the numbers that decide it.

A pure function of a result document (:func:`verdict`). Each :class:`Signal` is a condition on the
:class:`~rcdiag.assess.findings.Findings` with a status; the verdict is the most severe status among
the signals that fire (``healthy`` when none does), headed by the first firing signal in
:data:`SIGNALS` order. Each signal names the one or two metrics that decide it, shown on a gauge of
the published ranges of the metric registry (:mod:`rcdiag.assess.registry`).
"""

from __future__ import annotations

import math
from collections.abc import Callable, Mapping
from dataclasses import dataclass
from typing import Any, Literal

from rcdiag.assess.findings import LIMITS, Findings, findings, tokens
from rcdiag.assess.registry import REGISTRY
from rcdiag.formatting import pct, short

Status = Literal["healthy", "watch", "act"]


@dataclass(frozen=True)
class Band:
    """Values below ``upto`` (and above the previous band) have this status and meaning."""

    upto: float
    status: Literal["ok", "warn", "fail"]
    label: str


@dataclass(frozen=True)
class Scale:
    """A gauge: where a value sits among published ranges."""

    label: str
    log: bool
    lo: float
    hi: float
    bands: tuple[Band, ...]
    markers: tuple[tuple[float, str], ...] = ()
    source: str = ""


INF = math.inf
CSS_STATUS: dict[str, Literal["ok", "warn", "fail"]] = {
    "healthy": "ok",
    "watch": "warn",
    "act": "fail",
}
"""The page's colour classes of the registry's statuses."""


def scale(metric: str) -> Scale:
    """The gauge of ``metric``: its registry record's bands as contiguous ranges.

    Example:
        >>> [(b.upto, b.status) for b in scale("rollout_corr/k3_kl").bands]
        [(0.001, 'ok'), (0.1, 'warn'), (inf, 'fail')]
    """
    record = REGISTRY[metric]
    assert record.gauge is not None, metric
    bands: list[Band] = []
    below = "healthy"
    for band in sorted(record.bands, key=lambda b: b.limit):
        assert isinstance(band.limit, float)
        bands.append(Band(band.limit, CSS_STATUS[below], f"{below}: ≤ {short(band.limit)}"))
        below = band.status
    last = record.bands[-1]
    bands.append(Band(INF, CSS_STATUS[below], f"{below} — {last.source}"))
    return Scale(
        record.label,
        record.gauge.log,
        record.gauge.lo,
        record.gauge.hi,
        tuple(bands),
        record.gauge.marks,
        "; ".join(b.source for b in record.bands),
    )


@dataclass(frozen=True)
class Signal:
    """One reason for a verdict: a condition, its status, a headline, the metrics that decide it."""

    id: str
    status: Status
    applies: Callable[[Findings], bool]
    headline: Callable[[Findings], str]
    deciding: Callable[[Findings], list[tuple[str, float | None, str]]]
    """(metric, value, caption) of the one or two numbers shown on gauges."""


def _k3(f: Findings, caption: str = "whole dump") -> tuple[str, float | None, str]:
    return ("rollout_corr/k3_kl", f.k3_kl, caption)


def _abs(f: Findings) -> tuple[str, float | None, str]:
    return ("rcdiag/abs_log_ratio_mean", f.abs_log_ratio, "whole dump")


def _drift_headline(f: Findings) -> str:
    t = f.trend
    assert t is not None
    return (
        f"the mismatch grows over {t.steps} steps: {t.words()}, past the dense-bf16 range "
        f"(≤ {short(LIMITS['tiny_k3_kl'])})"
    )


def _drift_deciding(f: Findings) -> list[tuple[str, float | None, str]]:
    t = f.trend
    assert t is not None
    return [
        ("rollout_corr/k3_kl", t.recent, f"last steps (first steps: {short(t.first)})"),
        ("rcdiag/abs_log_ratio_mean", t.recent_abs_log_ratio, "last steps"),
    ]


def _large_headline(f: Findings) -> str:
    kl = f", and kl = {short(f.kl)} (verl flags |kl| > 0.1)" if abs(f.kl or 0.0) > 0.1 else ""
    return (
        f"rollout and training disagree strongly: {f.abs_text()}, past slime's gate 0.1 "
        f"(healthy bf16 ≈ 0.01, fp8 rollouts ≈ 0.27){kl}"
    )


def _seq_headline(f: Findings) -> str:
    return (
        f"the per-token mismatch is small ({f.k3_text()}) but compounds over long responses: at "
        f"~{tokens(f.length_mean)} tokens per response the sequence ratios explode "
        f"(χ²_seq = {short(f.chi2_seq)}, ESS_seq = {short(f.ess_seq)})"
    )


def above_healthy(f: Findings) -> str:
    """The figure(s) past the healthy dense-bf16 limits that make the mismatch ``moderate``."""
    k3_over = f.worst_k3_kl > LIMITS["tiny_k3_kl"]
    abs_over = f.worst_abs_log_ratio > LIMITS["tiny_abs_log_ratio"]
    # the last steps' value is cited when only it is past the limit (it fired the rule)
    k3_recent = k3_over and (f.k3_kl or 0.0) <= LIMITS["tiny_k3_kl"]
    abs_recent = abs_over and (f.abs_log_ratio or 0.0) <= LIMITS["tiny_abs_log_ratio"]
    k3 = f"{f.k3_text(k3_recent)}, above the dense-bf16 range (≤ {short(LIMITS['tiny_k3_kl'])})"
    mean = (
        f"{f.abs_text(abs_recent)}, above the healthy bf16 level "
        f"(≤ {short(LIMITS['tiny_abs_log_ratio'])})"
    )
    if k3_over and abs_over:
        return f"{k3}; {mean}"
    if k3_over:
        return f"{k3}; {f.abs_text(False)} is within the healthy range"
    return f"{mean}; {f.k3_text(False)} is within the dense-bf16 range"


SIGNALS: tuple[Signal, ...] = (
    Signal("drift", "act", lambda f: f.drifting, _drift_headline, _drift_deciding),
    Signal(
        "large", "act", lambda f: f.size == "large", _large_headline, lambda f: [_abs(f), _k3(f)]
    ),
    Signal(
        "catastrophic_severe",
        "act",
        lambda f: f.catastrophic_severe,
        lambda f: (
            f"{pct(f.veto_fraction)} of sequences hold a catastrophic token "
            f"(π_train/π_rollout < {short(f.veto_threshold)}; verl's alarm is 10%)"
        ),
        lambda f: [("rcdiag/veto_fraction", f.veto_fraction, "whole dump"), _k3(f)],
    ),
    Signal(
        "sequence_ratios",
        "watch",
        lambda f: f.sequence_ratios_explode,
        _seq_headline,
        lambda f: [("rollout_corr/chi2_seq", f.chi2_seq, "whole dump"), _k3(f)],
    ),
    Signal(
        "catastrophic",
        "watch",
        lambda f: f.catastrophic and not f.catastrophic_severe,
        lambda f: (
            f"catastrophic tokens present: {pct(f.catastrophic_fraction)} of tokens, in "
            f"{pct(f.veto_fraction)} of sequences"
        ),
        lambda f: [("rcdiag/veto_fraction", f.veto_fraction, "whole dump"), _k3(f)],
    ),
    Signal(
        "moderate",
        "watch",
        lambda f: f.size == "moderate",
        lambda f: f"the mismatch is above the healthy bf16 level: {above_healthy(f)}",
        lambda f: [_k3(f), _abs(f)],
    ),
    Signal(
        "growing",
        "watch",
        lambda f: f.growing and not f.drifting,
        lambda f: f"the mismatch is small but grows: {f.trend.words() if f.trend else 'k3_kl'}",
        lambda f: [_k3(f), _abs(f)],
    ),
)
"""The reasons for a verdict, most telling first."""

HEALTHY_HEADLINE = (
    "rollout and training agree: k3_kl = {k3} and mean |Δ log p| = {abs}, inside the healthy "
    "dense-bf16 ranges"
)


def gauge(metric: str, value: float | None, caption: str) -> dict[str, Any]:
    """Where ``value`` sits on the published ranges of ``metric`` (its registry record)."""
    gauge_scale = scale(metric)
    shown = abs(value) if value is not None and metric == "rollout_corr/kl" else value
    band = None
    if shown is not None:
        band = next(b for b in gauge_scale.bands if shown <= b.upto or b.upto == INF)
    return {
        "metric": metric,
        "label": gauge_scale.label,
        "caption": caption,
        "value": shown,
        "display": short(shown) if not metric.endswith("fraction") else pct(shown),
        "status": band.status if band else None,
        "band": band.label if band else None,
        "source": gauge_scale.source,
        "scale": {
            "log": gauge_scale.log,
            "lo": gauge_scale.lo,
            "hi": gauge_scale.hi,
            "bands": [
                {"upto": None if b.upto == INF else b.upto, "status": b.status, "label": b.label}
                for b in gauge_scale.bands
            ],
            "markers": [{"at": at, "label": label} for at, label in gauge_scale.markers],
        },
    }


def verdict(document: Mapping[str, Any]) -> dict[str, Any]:
    """The verdict of a result document: status, headline, deciding gauges, every firing signal."""
    f = findings(document)
    if not f.complete:
        return {
            "status": None,
            "headline": "no verdict: the document has no overall k3_kl, kl or mean |Δ log p|",
            "deciding": [],
            "signals": [],
        }
    fired = [s for s in SIGNALS if s.applies(f)]
    diagnosis = document.get("diagnosis") or {"verdict": "healthy", "causes": []}
    status: Status = diagnosis["verdict"]
    bug = next((c for c in diagnosis["causes"] if c["kind"] == "dump_bug"), None)
    if bug is not None:
        headline = f"a bug in how the dump was made ({bug['id']}): {bug['summary']}"
        deciding = [_k3(f), _abs(f)]
        fired = []
    elif fired:
        lead = fired[0]
        headline = lead.headline(f)
        deciding = lead.deciding(f)
    else:
        headline = HEALTHY_HEADLINE.format(k3=short(f.k3_kl), abs=short(f.abs_log_ratio))
        deciding = [_k3(f), _abs(f)]
    return {
        "status": status,
        "headline": headline[0].upper() + headline[1:] + ".",
        "deciding": [gauge(m, v, c) for m, v, c in deciding if v is not None],
        "signals": [{"id": s.id, "status": s.status, "text": s.headline(f)} for s in fired[1:]],
    }
