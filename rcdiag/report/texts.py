"""The report's fixed words: the glossary and the preset table's columns (the key-metric cards'
words are the metrics' records, :data:`rcdiag.metrics.records.KEY_METRICS`).

Descriptions only; every number in them is read from :mod:`rcdiag.assess` (the registry's bands,
the veto τ), never written here.
"""

from __future__ import annotations

from rcdiag.metrics.offpolicy import DEFAULT_VETO_THRESHOLD
from rcdiag.metrics.records import ABS_LOG_RATIO_MEAN, K3_KL, MetricRecord
from rcdiag.status import Status


def _limit(record: MetricRecord, status: Status) -> str:
    return f"{record.limit(status):g}"


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
        f"{_limit(ABS_LOG_RATIO_MEAN, 'act')}.",
    ),
    (
        "NeMo-RL gate",
        "NVIDIA NeMo-RL flags a bf16 run when the token KL (k3) between engines exceeds "
        f"{_limit(K3_KL, 'watch')}.",
    ),
    (
        "catastrophic token",
        f"A token with ρ < τ ({DEFAULT_VETO_THRESHOLD:g} by default): the trainer finds it nearly "
        "impossible.",
    ),
)
"""Plain-words definitions of the jargon the report uses (the About section)."""

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
