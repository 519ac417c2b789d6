"""Sentences about the measured figures of a dump, in the words of :mod:`rcdiag.assess.wording`.

The verdict's headline and the recommendation's reasons quote these, so a figure is cited the same
way wherever it appears: the same value (overall, or over the last steps when those decide the size),
the same status, the same size word.
"""

from __future__ import annotations

from rcdiag.assess.findings import Findings, tokens
from rcdiag.assess.wording import (
    OVERALL,
    RECENT,
    SIZE_WORDS,
    judged,
    status_of,
    status_phrase,
    symbol,
)
from rcdiag.metrics import records
from rcdiag.metrics.records import REGISTRY
from rcdiag.status import Status, rank

K3 = records.K3_KL.name
ABS = records.ABS_LOG_RATIO_MEAN.name
CHI2_TOKEN = records.CHI2_TOKEN.name
KL = records.KL.name
CHI2_SEQ = records.CHI2_SEQ.name
ESS_SEQ = records.ESS_SEQ.name

SIZE_METRICS = (ABS, K3, CHI2_TOKEN)
"""The per-token figures whose statuses make the size of the mismatch."""


def _recent(f: Findings, metric: str) -> float | None:
    if f.trend is None:
        return None
    if metric == K3:
        return f.trend.recent
    if metric == ABS:
        return f.trend.recent_abs_log_ratio
    return None


def _overall(f: Findings, metric: str) -> float | None:
    return {K3: f.k3_kl, ABS: f.abs_log_ratio, CHI2_TOKEN: f.chi2_token}[metric]


def cited(f: Findings, metric: str) -> tuple[float | None, str, Status]:
    """The value of a per-token figure a sentence cites, its scope and its status: the last steps'
    value when they decide the size and are worse than the overall one, else the overall value."""
    overall = _overall(f, metric)
    status = status_of(metric, overall) or "healthy"
    recent = _recent(f, metric)
    if f.recent_decides and recent is not None:
        recent_status = status_of(metric, recent) or "healthy"
        if rank(recent_status) > rank(status):
            return recent, RECENT, recent_status
    return overall, OVERALL, status


def figure(f: Findings, metric: str) -> str:
    """A per-token figure as :func:`cited` picks it, judged: ``k3_kl = … overall, within …``."""
    value, scope, _ = cited(f, metric)
    return judged(metric, value, scope, _overall(f, metric) if scope == RECENT else None)


def per_token(f: Findings) -> str:
    """``the per-token mismatch is moderate: k3_kl = …, past the healthy range (…); mean |Δ log p|
    = …, within the healthy range (…)`` — the size word and the figures that make it."""
    word = SIZE_WORDS[f.size]
    statuses = {m: cited(f, m)[2] for m in SIZE_METRICS if _overall(f, m) is not None}
    if f.size == "large":
        shown = [m for m in SIZE_METRICS if statuses.get(m) == "act"]
    elif f.size == "moderate":
        past = [m for m in (K3, ABS) if statuses.get(m) == "watch"]
        shown = past + [m for m in (K3, ABS) if m not in past and m in statuses]
    else:
        shown = [m for m in (K3, ABS) if m in statuses]
    return f"the per-token mismatch is {word}: " + "; ".join(figure(f, m) for m in shown)


def act_limits() -> str:
    """``mean |Δ log p| ≤ 0.1, k3_kl ≤ 0.1, χ²_token ≤ 1``: what the size ``large`` starts past."""
    parts = []
    for metric in SIZE_METRICS:
        band = REGISTRY[metric].band("act")
        if band is not None:
            parts.append(f"{symbol(metric)} ≤ {band.limit:g}")
    return ", ".join(parts)


def kl_clause(f: Findings) -> str:
    """``; kl = 0.12 overall, past the healthy range (|kl| > 0.1, verl)`` when kl is not healthy."""
    status = status_of(KL, f.kl)
    if status in (None, "healthy"):
        return ""
    return f"; {judged(KL, f.kl)}"


def sequence_figures(f: Findings) -> str:
    """χ²_seq and ESS_seq, judged, the ones past their healthy range first."""
    present = [(m, v) for m, v in ((CHI2_SEQ, f.chi2_seq), (ESS_SEQ, f.ess_seq)) if v is not None]
    present.sort(key=lambda mv: status_of(mv[0], mv[1]) == "healthy")
    return " and ".join(judged(m, v) for m, v in present)


def compounding(f: Findings) -> str:
    """``at ~180 tokens per response the sequence weights are unreliable: ESS_seq = …``."""
    return (
        f"at ~{tokens(f.length_mean)} tokens per response the sequence-level weights are "
        f"unreliable: {sequence_figures(f)}"
    )


def growth(f: Findings) -> str:
    """``k3_kl ×107, from 1.4e-4 (…) to 0.015 (…), past the healthy range (> 0.001, …)``."""
    t = f.trend
    assert t is not None
    status = status_of(K3, t.recent) or "healthy"
    return f"{t.words()}, {status_phrase(K3, status)}"


def sentence(text: str) -> str:
    """``text`` with a capital first letter and a full stop."""
    text = text.strip()
    return text[:1].upper() + text[1:] + ("" if text.endswith(".") else ".")
