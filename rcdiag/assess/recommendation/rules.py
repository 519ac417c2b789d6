"""The rule table of the recommendation: when each rule fires, what it does, and why in words.

Data (:data:`RULES`), documented row by row in ``docs/recommendation.md``. Each rule is a condition
on the :class:`~rcdiag.assess.findings.Findings` (limits in :data:`~rcdiag.assess.findings.ADVICE_LIMITS`,
the health limits read from the registry) and its reason, written with the sentences of
:mod:`rcdiag.assess.statements` so it cites each figure as the verdict does. The rule ids are names
for the documentation and the JSON; the reasons never mention them.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass

from rcdiag.assess import statements
from rcdiag.assess.findings import ADVICE_LIMITS, Findings, tokens
from rcdiag.assess.recommendation.candidates import MAX_K2_THRESHOLD
from rcdiag.dialects import Dialect
from rcdiag.formatting import pct, short
from rcdiag.metrics.offpolicy import DEFAULT_VETO_THRESHOLD


def _max_criterion(dialect: Dialect) -> str:
    if dialect == "latest":
        return (
            f"seq_max_k2 ≤ {MAX_K2_THRESHOLD}, i.e. every |log ratio| ≤ 9.21 — verl's replacement "
            "for the 1e-4 veto"
        )
    return f"the veto, rollout_token_veto_threshold = {DEFAULT_VETO_THRESHOLD:g}"


GEO_VALVE = (
    "Geometric-mean rejection is a safety valve: it rejects few sequences now and more as the "
    "mismatch grows."
)


def drift_fact(f: Findings) -> str:
    """``The mismatch grows over 20 steps: k3_kl ×107, from … to …, past the healthy range (…).``"""
    if f.trend is None:
        return "The mismatch grows over the steps."
    return f"The mismatch grows over {f.trend.steps} steps: {statements.growth(f)}."


def _sequence_weights(f: Findings) -> str:
    if f.chi2_seq is not None and f.chi2_seq < -0.5:
        return (
            f"the sequence weights exp(Σℓ) collapse toward 0 (χ²_seq = {short(f.chi2_seq)}, "
            f"ESS_seq = {short(f.ess_seq)})"
        )
    return (
        f"χ²_seq = {short(f.chi2_seq)} against χ²_token = {short(f.chi2_token)}, "
        f"ESS_seq = {short(f.ess_seq)}"
    )


def _over_under(f: Findings) -> str:
    return "over" if (f.kl or 0.0) > 0 else "under"


@dataclass(frozen=True)
class AdviceRule:
    """One row of the rule table: when it fires, what it does, and why in plain words."""

    id: str
    when: str
    then: str
    applies: Callable[[Findings], bool]
    because: Callable[[Findings, Dialect], str]


def _g(value: float) -> str:
    return f"{value:g}"


TINY_WHEN = (
    f"k3_kl ≤ {_g(ADVICE_LIMITS['tiny_k3_kl'])} and mean |Δ log p| ≤ "
    f"{_g(ADVICE_LIMITS['tiny_abs_log_ratio'])} "
    "(overall and over the last quarter of steps), sequence ratios usable, no catastrophic "
    "tokens and no growing drift"
)
LARGE_WHEN = (
    f"mean |Δ log p| > {_g(ADVICE_LIMITS['large_abs_log_ratio'])} or χ²_token > "
    f"{_g(ADVICE_LIMITS['large_chi2_token'])} or k3_kl > {_g(ADVICE_LIMITS['large_k3_kl'])} "
    "(overall, or over "
    "the last quarter of steps when the verdict is act)"
)

RULES: tuple[AdviceRule, ...] = (
    AdviceRule(
        "tiny",
        TINY_WHEN,
        "metrics only (disabled); token TIS as insurance and bypass PPO-clip as alternatives",
        lambda f: (
            f.size == "tiny" and not (f.sequence_ratios_explode or f.catastrophic or f.drifting)
        ),
        lambda f, d: statements.sentence(
            f"{statements.per_token(f)}. A correction would change almost nothing"
        ),
    ),
    AdviceRule(
        "large",
        LARGE_WHEN,
        "correct at token level: token TIS",
        lambda f: f.size == "large",
        lambda f, d: statements.sentence(
            f"{statements.per_token(f)}. Uncorrected, these samples bias the policy gradient"
        ),
    ),
    AdviceRule(
        "moderate",
        "between the two: a per-token figure past its healthy range, none past its act limit",
        "correct at token level: token TIS",
        lambda f: f.size == "moderate",
        lambda f, d: statements.sentence(
            f"{statements.per_token(f)}. Every per-token figure stays within its act limit "
            f"({statements.act_limits()})"
        ),
    ),
    AdviceRule(
        "seq_explodes",
        f"χ²_seq > {_g(ADVICE_LIMITS['seq_chi2'])} or ESS_seq < {_g(ADVICE_LIMITS['seq_ess'])}",
        "no sequence-level IS (decoupled_seq_is, *_seq_tis, bypass_pg_is) and no seq_sum_k1 "
        "rejection: token level, or the geometric mean",
        lambda f: f.sequence_ratios_explode,
        lambda f, d: (
            f"Sequence-level ratios explode at these response lengths (mean "
            f"{tokens(f.length_mean)} tokens, max {tokens(f.length_max)}): the per-token mismatch "
            f"compounds in exp(Σℓ) and {_sequence_weights(f)}. Correct at token level (or "
            "filter on the geometric mean), not with sequence-level IS."
        ),
    ),
    AdviceRule(
        "bias",
        f"|kl| ≥ {_g(ADVICE_LIMITS['bias_share'])} × mean |Δ log p| and mean |Δ log p| > "
        f"{_g(ADVICE_LIMITS['tiny_abs_log_ratio'])}",
        "reweight, don't reject: no ratio-band (geometric) rejection",
        lambda f: f.systematic_bias,
        lambda f, d: (
            f"The mismatch is a systematic shift, not noise: |kl| = {short(abs(f.kl or 0.0))} is "
            f"{pct(f.bias_share, 0)} of mean |Δ log p| (the rollout engine is "
            f"{_over_under(f)}-confident, as with fp8 rollouts). Every sequence is shifted alike, "
            "so ratio-band rejection would discard almost all of them: reweight with token IS."
        ),
    ),
    AdviceRule(
        "catastrophic",
        f"≥ {_g(ADVICE_LIMITS['catastrophic_fraction'])} of the valid tokens have π_train/π_rollout < τ "
        f"({_g(DEFAULT_VETO_THRESHOLD)})",
        f"add a max criterion: seq_max_k2 ≤ {MAX_K2_THRESHOLD} (latest) or the veto "
        f"τ = {_g(DEFAULT_VETO_THRESHOLD)} (legacy)",
        lambda f: f.catastrophic,
        lambda f, d: (
            f"Catastrophic tokens present: {pct(f.catastrophic_fraction)} of valid tokens have "
            f"π_train/π_rollout < {short(f.veto_threshold)}, in {pct(f.veto_fraction)} of sequences. "
            "The trainer finds such a token nearly impossible, so the rest of its sequence is "
            f"off-policy too: reject the sequence with a max criterion ({_max_criterion(d)})."
        ),
    ),
    AdviceRule(
        "drift",
        f"the diagnosis finds a sustained rise of k3_kl (change-point test) and the recent k3_kl "
        f"is past {_g(ADVICE_LIMITS['tiny_k3_kl'])}",
        "act: add geometric-mean rejection at the sweep knee as a safety valve; flag the trend",
        lambda f: f.drifting,
        lambda f, d: f"{drift_fact(f)} {GEO_VALVE}",
    ),
    AdviceRule(
        "growing",
        f"a sustained rise of k3_kl, the recent k3_kl still ≤ {_g(ADVICE_LIMITS['tiny_k3_kl'])}",
        "a note: re-check on later steps",
        lambda f: f.growing and not f.drifting,
        lambda f, d: (
            f"The mismatch grows ({statements.growth(f) if f.trend else 'k3_kl rises'}): re-run "
            "rcdiag on later steps."
        ),
    ),
)
"""The rule table (docs/recommendation.md). Order is the order reasons are listed in."""


def rule_table() -> list[dict[str, str]]:
    """The rule table as rows (id, when, then), for the documentation and the report."""
    return [{"id": r.id, "when": r.when, "then": r.then} for r in RULES]
