"""Healthy / watch / act: the verdict at the top of the report, with the numbers that decide it.

A pure function of a result document (:func:`verdict`). The status is the diagnosis's verdict (the
one every command gives: the worst of the registry statuses and the diagnosed causes). Each
:class:`Signal` is a condition on the :class:`~rcdiag.assess.findings.Findings` with a status, a
headline and what it means for the reader (``blurb``); the verdict is headed by the first firing
signal of its own status in :data:`SIGNALS` order (a dump bug, a cause or a metric when none is),
and lists the others, none more severe than the verdict. Every sentence is written with
:mod:`rcdiag.assess.statements`, so a figure reads the same in the headline and in the reasons.
Each signal names the one or two metrics that decide it, shown on a gauge of the published ranges
of the metric registry (:mod:`rcdiag.assess.judge`).
"""

from __future__ import annotations

from collections.abc import Callable, Mapping
from dataclasses import dataclass
from typing import Any

from rcdiag.assess import statements
from rcdiag.assess.diagnosis.causes import CAUSE_TITLES
from rcdiag.assess.findings import Findings, findings
from rcdiag.assess.verdict.gauges import gauge
from rcdiag.assess.wording import RECENT, judged, status_of, status_phrase
from rcdiag.formatting import pct, short
from rcdiag.metrics.records import (
    ABS_LOG_RATIO_MEAN,
    CATASTROPHIC_TOKENS,
    CHI2_SEQ,
    K3_KL,
    VETO_FRACTION,
)
from rcdiag.model.advice import FiredSignal, Verdict
from rcdiag.status import Status, rank


@dataclass(frozen=True)
class Signal:
    """One reason for a verdict: a condition, its status, a headline, what it means for the reader
    (``blurb``), and the metrics that decide it."""

    id: str
    status: Status
    applies: Callable[[Findings], bool]
    headline: Callable[[Findings], str]
    deciding: Callable[[Findings], list[tuple[str, float | None, str]]]
    """(metric, value, caption) of the one or two numbers shown on gauges."""
    blurb: str


def _k3(f: Findings, caption: str = "whole dump") -> tuple[str, float | None, str]:
    return (K3_KL.name, f.k3_kl, caption)


def _abs(f: Findings) -> tuple[str, float | None, str]:
    return (ABS_LOG_RATIO_MEAN.name, f.abs_log_ratio, "whole dump")


def _drift_deciding(f: Findings) -> list[tuple[str, float | None, str]]:
    t = f.trend
    assert t is not None
    return [
        (K3_KL.name, t.recent, f"last steps (first steps: {short(t.first)})"),
        (ABS_LOG_RATIO_MEAN.name, t.recent_abs_log_ratio, "last steps"),
    ]


def _per_token_deciding(f: Findings) -> list[tuple[str, float | None, str]]:
    """The per-token figures the size sentence cites, with the scope it cites them in."""
    out = []
    for metric in (K3_KL.name, ABS_LOG_RATIO_MEAN.name):
        value, scope, _ = statements.cited(f, metric)
        out.append((metric, value, "last steps" if scope == RECENT else "whole dump"))
    return out


def _sequence_deciding(f: Findings) -> list[tuple[str, float | None, str]]:
    """χ²_seq when it is past its healthy range (ESS_seq has no gauge), then the per-token figures."""
    chi2 = [(CHI2_SEQ.name, f.chi2_seq, "whole dump")]
    if status_of(CHI2_SEQ.name, f.chi2_seq) in (None, "healthy"):
        chi2 = []
    return (chi2 + _per_token_deciding(f))[:2]


def _catastrophic(f: Findings) -> str:
    veto = VETO_FRACTION.name
    return (
        f"{pct(f.veto_fraction)} of sequences hold a catastrophic token (π_train/π_rollout < "
        f"{short(f.veto_threshold)}), {status_phrase(veto, status_of(veto, f.veto_fraction) or 'act')}"
    )


def _catastrophic_watch(f: Findings) -> str:
    share = CATASTROPHIC_TOKENS.name
    status = status_of(share, f.catastrophic_fraction) or "watch"
    return (
        f"catastrophic tokens present: {pct(f.catastrophic_fraction)} of tokens, "
        f"{status_phrase(share, status)}, in {pct(f.veto_fraction)} of sequences"
    )


SIGNALS: tuple[Signal, ...] = (
    Signal(
        "drift",
        "act",
        lambda f: f.drifting,
        lambda f: (
            f"the mismatch grows over {f.trend.steps if f.trend else 0} steps: "
            f"{statements.growth(f)}"
        ),
        _drift_deciding,
        "The mismatch grows during training: correct it now, and find what changes over the steps.",
    ),
    Signal(
        "large",
        "act",
        lambda f: f.size == "large",
        lambda f: f"{statements.per_token(f)}{statements.kl_clause(f)}",
        _per_token_deciding,
        "The mismatch is large enough to bias training. Correct it, and find its cause.",
    ),
    Signal(
        "catastrophic_severe",
        "act",
        lambda f: f.catastrophic_severe,
        _catastrophic,
        lambda f: [(VETO_FRACTION.name, f.veto_fraction, "whole dump"), _k3(f)],
        "Catastrophic tokens are frequent enough to bias training: reject their sequences, and "
        "check how the log-probs are computed.",
    ),
    Signal(
        "sequence_ratios",
        "watch",
        lambda f: f.sequence_ratios_explode,
        lambda f: statements.compounding(f),
        _sequence_deciding,
        "Sequence-level importance weights are unreliable at these lengths: correct at token "
        "level, and keep an eye on it.",
    ),
    Signal(
        "catastrophic",
        "watch",
        lambda f: f.catastrophic and not f.catastrophic_severe,
        _catastrophic_watch,
        lambda f: [(VETO_FRACTION.name, f.veto_fraction, "whole dump"), _k3(f)],
        "A few catastrophic tokens: reject their sequences with a max criterion, and keep an eye "
        "on them.",
    ),
    Signal(
        "moderate",
        "watch",
        lambda f: f.size == "moderate",
        statements.per_token,
        _per_token_deciding,
        "A mismatch worth knowing about. Correct it cheaply and keep an eye on it.",
    ),
    Signal(
        "growing",
        "watch",
        lambda f: f.growing and not f.drifting,
        lambda f: f"the mismatch grows: {statements.growth(f) if f.trend else 'k3_kl rises'}",
        lambda f: [_k3(f), _abs(f)],
        "The mismatch grows over the steps: re-check it on later steps.",
    ),
)
"""The reasons for a verdict, most telling first."""

HEALTHY_BLURB = "Rollout and training agree. No correction needed; keep logging the metrics."
DUMP_BUG_BLURB = (
    "The dump itself is wrong: fix how it is made first. No rollout correction applies, and the "
    "other numbers on this page describe the bug, not training."
)
OTHER_BLURBS: dict[str, str] = {
    "act": "Correct it, and find its cause.",
    "watch": "Worth knowing about: keep an eye on it.",
}
"""What a verdict means when no signal explains it (a cause or a metric status decides)."""


def _unexplained(document: Mapping[str, Any], status: Status) -> tuple[str, str]:
    """Headline and lead of a verdict no signal explains: the first cause, or else the first
    metric, with that status."""
    diagnosis = document.get("diagnosis") or {}
    cause = next((c for c in diagnosis.get("causes", []) if c["severity"] == status), None)
    if cause is not None:
        return f"{CAUSE_TITLES.get(cause['id'], cause['id'])}: {cause['summary']}", cause["id"]
    check = next((c for c in document.get("checks") or [] if c.get("status") == status), None)
    if check is not None:
        return judged(check["metric"], check["value"]), check["metric"]
    return f"the verdict is {status}", status


def verdict(document: Mapping[str, Any]) -> Verdict:
    """The verdict of a result document: status, headline, what it means (``blurb``), the lead
    reason, deciding gauges and every other firing signal (each no more severe than the verdict)."""
    f = findings(document)
    if not f.complete:
        return Verdict(
            status=None,
            headline="no verdict: the document has no overall k3_kl, kl or mean |Δ log p|",
            blurb="",
            lead=None,
        )
    diagnosis = document.get("diagnosis") or {"verdict": "healthy", "causes": []}
    status: Status = diagnosis["verdict"]
    fired = [s for s in SIGNALS if s.applies(f) and rank(s.status) <= rank(status)]
    bug = next((c for c in diagnosis["causes"] if c["kind"] == "dump_bug"), None)
    lead = next((s for s in fired if s.status == status), None)
    if bug is not None:
        title = CAUSE_TITLES.get(bug["id"], "a bug in how the dump was made")
        headline = f"a bug in how the dump was made — {title.lower()}: {bug['summary']}"
        blurb, lead_id, deciding, fired = DUMP_BUG_BLURB, bug["id"], [_k3(f), _abs(f)], []
    elif lead is not None:
        headline, blurb, lead_id, deciding = lead.headline(f), lead.blurb, lead.id, lead.deciding(f)
        fired = [s for s in fired if s is not lead]
    elif status == "healthy":
        headline = (
            f"rollout and training agree: {judged('rollout_corr/k3_kl', f.k3_kl)} and "
            f"{judged('rcdiag/abs_log_ratio_mean', f.abs_log_ratio)}"
        )
        blurb, lead_id, deciding = HEALTHY_BLURB, "healthy", [_k3(f), _abs(f)]
    else:
        headline, lead_id = _unexplained(document, status)
        blurb, deciding = OTHER_BLURBS[status], [_k3(f), _abs(f)]
    return Verdict(
        status=status,
        headline=statements.sentence(headline),
        blurb=blurb,
        lead=lead_id,
        deciding=tuple(gauge(m, v, c) for m, v, c in deciding if v is not None),
        signals=tuple(
            FiredSignal(s.id, s.status, statements.sentence(s.headline(f))) for s in fired
        ),
    )
