"""The report's fixed words: the glossary, the key-metric cards, the preset table's columns.

Descriptions only; every number in them is read from :mod:`rcdiag.assess` (the registry's bands,
the veto τ), never written here.
"""

from __future__ import annotations

from rcdiag.assess.references import CATASTROPHIC_RATIO
from rcdiag.assess.registry import REGISTRY, Status


def _limit(metric: str, status: Status) -> str:
    band = REGISTRY[metric].band(status)
    assert band is not None and isinstance(band.limit, float)
    return f"{band.limit:g}"


CHI2_WHAT = (
    "{sq} − 1 of the {w}: ≈ their variance when their mean is ≈ 1; negative when the weights "
    "are below 1 on average."
)

GLOSSARY: tuple[tuple[str, str], ...] = (
    (
        "ℓ, ρ",
        "ℓ = log π_train − log π_rollout of a sampled token; ρ = e^ℓ is its importance weight.",
    ),
    (
        "k1 / k2 / k3",
        "Three estimators of KL divergence from ℓ: k1 = −ℓ, k2 = ½ℓ², k3 = e^ℓ − 1 − ℓ "
        "(k3 is always ≥ 0 and has low variance; verl's k3_kl averages it).",
    ),
    (
        "χ² (chi2)",
        "E[ρ²] − 1: ≈ the variance of the IS weights when E[ρ] ≈ 1; negative when the weights are "
        "below 1 on average.",
    ),
    (
        "ESS",
        "Effective sample size (Kish): (Σw)² / (n Σw²), the share of samples that effectively count "
        "once weighted; 1 when all weights are equal.",
    ),
    (
        "TIS",
        "Truncated importance sampling: each token (or sequence) is reweighted by min(ρ, C), so one "
        "huge weight cannot dominate the gradient.",
    ),
    (
        "IcePop",
        "Instead of truncating, zero the weight of tokens whose ρ falls outside a band "
        "(e.g. [0.5, 5]): they stop contributing to the gradient.",
    ),
    (
        "rejection (RS)",
        "Drop whole tokens or sequences whose divergence exceeds a threshold (geometric mean: "
        "seq_mean_k1; single worst token: seq_max_k2).",
    ),
    (
        "slime's gate",
        "The slime RL framework flags a batch when the mean |Δ log p| per token exceeds "
        f"{_limit('rcdiag/abs_log_ratio_mean', 'act')}.",
    ),
    (
        "NeMo-RL gate",
        "NVIDIA NeMo-RL flags a bf16 run when the token KL (k3) between engines exceeds "
        f"{_limit('rollout_corr/k3_kl', 'watch')}.",
    ),
    (
        "catastrophic token",
        f"A token with ρ < τ ({CATASTROPHIC_RATIO:g} by default): the trainer finds it nearly "
        "impossible.",
    ),
)
"""Plain-words definitions of the jargon the report uses (the About section)."""

KEY_METRICS: tuple[tuple[str, str, str], ...] = (
    (
        "rollout_corr/k3_kl",
        "k3_kl",
        "Token-level KL(π_rollout‖π_train), K3 estimator.",
    ),
    (
        "rcdiag/abs_log_ratio_mean",
        "mean |Δ log p|",
        "Average per-token disagreement |log π_train − log π_rollout|.",
    ),
    (
        "rollout_corr/kl",
        "kl",
        "Mean log π_rollout − log π_train: > 0 when the rollout engine is over-confident.",
    ),
    (
        "rollout_corr/chi2_token",
        "chi2_token",
        CHI2_WHAT.format(w="token IS weights ρ", sq="E[ρ²]"),
    ),
    (
        "rollout_corr/chi2_seq",
        "chi2_seq",
        CHI2_WHAT.format(w="sequence IS weights ∏ρ", sq="E[(∏ρ)²]"),
    ),
    (
        "rcdiag/ess_token",
        "ESS · token",
        "Effective share of tokens once weighted by ρ.",
    ),
    (
        "rcdiag/ess_seq",
        "ESS · sequence",
        "Effective share of sequences once weighted by ∏ρ.",
    ),
    (
        "rcdiag/veto_fraction",
        "catastrophic sequences",
        "Sequences holding a token with π_train/π_rollout < τ.",
    ),
    (
        "rcdiag/catastrophic_token_fraction",
        "catastrophic tokens",
        "Tokens with π_train/π_rollout < τ (τ = 1e-4 unless set).",
    ),
    (
        "rollout_corr/log_ppl_abs_diff",
        "log_ppl_abs_diff",
        "Mean over sequences of |mean token Δ log p|: what geometric rejection filters.",
    ),
    (
        "rcdiag/ratio_outside_0.5_2",
        "tokens with ρ ∉ [0.5, 2]",
        "Tokens whose probability differs by more than 2× between the engines.",
    ),
    (
        "rcdiag/response_length_mean",
        "response length",
        "Valid tokens per sequence (mean; max in the note).",
    ),
)
"""The key-metric cards: metric, label, what it measures (the ranges come from the registry)."""

SHARES = {
    "rcdiag/veto_fraction",
    "rcdiag/catastrophic_token_fraction",
    "rcdiag/ratio_outside_0.5_2",
}

SUMMARY_COLUMNS: tuple[tuple[str, str], ...] = (
    ("kept_token_share", "kept tokens"),
    ("kept_sequence_share", "sequences untouched"),
    ("rejected_sequence_share", "sequences rejected"),
    ("weight_mass_removed", "IS mass truncated"),
    ("ess", "ESS"),
    ("max_weight", "max weight"),
)
SHARE_FIGURES = {
    "kept_token_share",
    "kept_sequence_share",
    "rejected_sequence_share",
    "weight_mass_removed",
}
