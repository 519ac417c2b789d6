"""verl's off-policy diagnostic metrics (docs/metrics.md) plus rcdiag's own mismatch diagnostics.

Notation (docs/metrics.md): per token ℓ = log π_train − log π_rollout (``old − rollout``), ρ = exp ℓ, valid
tokens are those with mask ≠ 0. Per row i: n_i valid tokens, S_i = Σ_valid ℓ, a_i / b_i = masked mean of
the training / rollout log-probs (Σ / n_i, and 0 for an empty row), d_i = b_i − a_i. "Pooled" means
Σ over all valid tokens of the batch divided by V = Σ n_i. verl writes these divisors as Σm + 1e-8,
which for its integer masks is exactly the count (:func:`count_divisor`). Row means run over all B
rows, empty rows included. Clamping to ±20 happens exactly where verl clamps (chi2_token, chi2_seq and
the IS-style weights), never in kl or k3_kl.

Everything is computed as per-row sufficient statistics (:func:`row_statistics`) that are summed,
maximised or minimised per step, and turned into metrics by :func:`offpolicy_metrics`; the overall value
is the same formula applied to the statistics of every step together.
"""

from __future__ import annotations

import math
from collections.abc import Mapping
from typing import Any

import numpy as np

from rcdiag.metrics.grouped import Kind
from rcdiag.metrics.ragged import F64, RaggedBatch
from rcdiag.metrics.token_sums import SAFETY_BOUND, token_sums

DEFAULT_VETO_THRESHOLD = 1e-4
"""τ of verl's legacy geometric presets: a token with ρ < τ is catastrophic (docs/correction.md)."""

LOG_RATIO_QUANTILES: dict[str, float] = {
    "p0.1": 0.001,
    "p1": 0.01,
    "p50": 0.5,
    "p99": 0.99,
    "p99.9": 0.999,
}

VERL_OFFPOLICY_METRICS: tuple[str, ...] = (
    "rollout_corr/training_ppl",
    "rollout_corr/training_log_ppl",
    "rollout_corr/kl",
    "rollout_corr/k3_kl",
    "rollout_corr/rollout_ppl",
    "rollout_corr/rollout_log_ppl",
    "rollout_corr/log_ppl_diff",
    "rollout_corr/log_ppl_abs_diff",
    "rollout_corr/log_ppl_diff_max",
    "rollout_corr/log_ppl_diff_min",
    "rollout_corr/ppl_ratio",
    "rollout_corr/chi2_token",
    "rollout_corr/chi2_seq",
)
"""The 13 names ``compute_offpolicy_metrics`` logs, in every verl version."""

LEGACY_VETO_METRICS: tuple[str, ...] = (
    "rollout_corr/rollout_is_veto_fraction",
    "rollout_corr/rollout_is_catastrophic_token_fraction",
)
"""Logged by verl in the legacy dialect whether or not the veto is enabled (docs/correction.md)."""

RCDIAG_METRICS: tuple[str, ...] = (
    "rcdiag/veto_fraction",
    "rcdiag/catastrophic_token_fraction",
    "rcdiag/ess_token",
    "rcdiag/ess_seq",
    "rcdiag/abs_log_ratio_mean",
    "rcdiag/abs_log_ratio_max",
    "rcdiag/ratio_outside_0.9_1.1",
    "rcdiag/ratio_outside_0.5_2",
    *(f"rcdiag/log_ratio_{name}" for name in LOG_RATIO_QUANTILES),
    "rcdiag/response_length_mean",
    "rcdiag/response_length_max",
    "rcdiag/k3_kl_stderr",
)

ROW_STATISTICS: dict[str, Kind] = {
    "rows": "sum",
    "positions": "sum",
    "valid_tokens": "sum",
    "nonempty_rows": "sum",
    "training_ppl": "sum",
    "training_log_ppl": "sum",
    "rollout_ppl": "sum",
    "rollout_log_ppl": "sum",
    "log_ppl_diff": "sum",
    "log_ppl_abs_diff": "sum",
    "log_ppl_diff_max": "max",
    "log_ppl_diff_min": "min",
    "ppl_ratio": "sum",
    "log_ratio": "sum",
    "k3": "sum",
    "chi2_seq": "sum",
    "token_weight": "sum",
    "token_weight_sq": "sum",
    "seq_weight": "sum",
    "seq_weight_sq": "sum",
    "abs_log_ratio": "sum",
    "abs_log_ratio_max": "max",
    "outside_0.9_1.1": "sum",
    "outside_0.5_2": "sum",
    "catastrophic_tokens": "sum",
    "vetoed_rows": "sum",
    "length_max": "max",
    "log_ratio_sq": "sum",
    "log_ratio_by_n": "sum",
    "valid_sq": "sum",
    "k3_row_sq": "sum",
    "k3_by_n": "sum",
    "token_weight_row_sq": "sum",
    "token_weight_by_n": "sum",
    "weight_abs_dev": "sum",
}
"""The per-row sufficient statistics and how each combines across rows."""


def masked_log_ratio(batch: RaggedBatch) -> F64:
    """ℓ = old − rollout at valid tokens and exactly 0 elsewhere (garbage under the mask is dropped);
    the batch computes it once for every consumer."""
    return batch.log_ratio


def row_statistics(batch: RaggedBatch, log_ratio: F64, veto_threshold: float) -> dict[str, F64]:
    """Per-row sufficient statistics of :data:`ROW_STATISTICS` for one batch.

    Args:
        batch: the rows.
        log_ratio: :func:`masked_log_ratio` of ``batch`` (passed in so callers compute it once).
        veto_threshold: τ; a valid token with ℓ < log τ is catastrophic (docs/correction.md, no clamp).

    Every token function summed (:func:`~rcdiag.metrics.token_sums.token_sums`) is 0 at ℓ = 0, so
    invalid positions (where ℓ was set to 0) add nothing; the ones that are not (weights, band and
    veto counts) are masked.
    Overflows give +inf (e.g. k3 of ℓ > 709) and ∞ − ∞ gives NaN (mean log-probs beyond the
    float64 range), as verl's float64 arithmetic does.
    """
    with np.errstate(over="ignore", invalid="ignore"):
        return _row_statistics(batch, log_ratio, veto_threshold)


def count_divisor(count: F64) -> F64:
    """verl's masked-mean divisor Σm + 1e-8 as torch evaluates it for an integer or bool mask.

    The sum of such a mask is an integer; adding 1e-8 promotes it to float32, where the 1e-8
    vanishes: the divisor is exactly the count n of valid tokens (docs/metrics.md, "Masked means").
    An empty mask sums to 0 over 0 tokens, so any positive divisor gives verl's 0; 1 is used.

    Example:
        >>> count_divisor(np.array([0.0, 1.0, 7.0]))
        array([1., 1., 7.])
    """
    return np.maximum(count, 1.0)


def _row_statistics(batch: RaggedBatch, log_ratio: F64, veto_threshold: float) -> dict[str, F64]:
    sums = token_sums(batch, log_ratio, veto_threshold)
    n, old_sum, seq_sum = sums["n"], sums["old_sum"], sums["seq_sum"]
    row_weight, k3, catastrophic = sums["row_weight"], sums["k3"], sums["catastrophic"]
    divisor = count_divisor(n)
    a = old_sum / divisor
    b = (old_sum - seq_sum) / divisor  # Σ rollout = Σ old − Σ ℓ over the valid tokens
    d = b - a
    seq_weight = np.exp(np.clip(seq_sum, -SAFETY_BOUND, SAFETY_BOUND))
    nonempty = n > 0
    return {
        "rows": np.ones(batch.rows),
        "positions": batch.lengths.astype(np.float64),
        "valid_tokens": n,
        "nonempty_rows": nonempty.astype(np.float64),
        "training_ppl": np.exp(-a),
        "training_log_ppl": -a,
        "rollout_ppl": np.exp(-b),
        "rollout_log_ppl": -b,
        "log_ppl_diff": d,
        "log_ppl_abs_diff": np.abs(d),
        "log_ppl_diff_max": d,
        "log_ppl_diff_min": d,
        "ppl_ratio": np.exp(d),
        "log_ratio": seq_sum,
        "k3": k3,
        "chi2_seq": np.expm1(2.0 * np.clip(seq_sum, -SAFETY_BOUND, SAFETY_BOUND)),
        "token_weight": row_weight,
        "token_weight_sq": sums["row_weight_sq"],
        "seq_weight": np.where(nonempty, seq_weight, 0.0),
        "seq_weight_sq": np.where(nonempty, seq_weight * seq_weight, 0.0),
        "abs_log_ratio": sums["row_abs"],
        "abs_log_ratio_max": sums["abs_max"],
        # |ρ − 1| > 0.1 is ρ ∉ [0.9, 1.1]; |ℓ| > ln 2 is ρ ∉ [0.5, 2] (0 at invalid positions)
        "outside_0.9_1.1": sums["outside_near"],
        "outside_0.5_2": sums["outside_far"],
        "catastrophic_tokens": catastrophic,
        "vetoed_rows": (catastrophic > 0).astype(np.float64),
        "length_max": n,
        # sequence-level second moments for clustered standard errors (docs/diagnosis.md)
        "log_ratio_sq": seq_sum * seq_sum,
        "log_ratio_by_n": seq_sum * n,
        "valid_sq": n * n,
        "k3_row_sq": k3 * k3,
        "k3_by_n": k3 * n,
        "token_weight_row_sq": row_weight * row_weight,
        "token_weight_by_n": row_weight * n,
        "weight_abs_dev": sums["row_weight_abs_dev"],
    }


def verl_offpolicy_metrics(stats: Mapping[str, Any]) -> dict[str, Any]:
    """The 13 metrics of :data:`VERL_OFFPOLICY_METRICS` from summed row statistics with a valid
    token (:func:`offpolicy_metrics` gives the formulas); each statistic a float, or an array of
    one value per step (then every metric is such an array)."""
    rows, pooled = stats["rows"], stats["valid_tokens"]  # V: verl's Σm + 1e-8 (count_divisor)
    return {
        "rollout_corr/training_ppl": stats["training_ppl"] / rows,
        "rollout_corr/training_log_ppl": stats["training_log_ppl"] / rows,
        "rollout_corr/kl": -stats["log_ratio"] / pooled,
        "rollout_corr/k3_kl": stats["k3"] / pooled,
        "rollout_corr/rollout_ppl": stats["rollout_ppl"] / rows,
        "rollout_corr/rollout_log_ppl": stats["rollout_log_ppl"] / rows,
        "rollout_corr/log_ppl_diff": stats["log_ppl_diff"] / rows,
        "rollout_corr/log_ppl_abs_diff": stats["log_ppl_abs_diff"] / rows,
        "rollout_corr/log_ppl_diff_max": stats["log_ppl_diff_max"],
        "rollout_corr/log_ppl_diff_min": stats["log_ppl_diff_min"],
        "rollout_corr/ppl_ratio": stats["ppl_ratio"] / rows,
        # verl: masked_mean(ρ²) − 1 with ρ² = exp(2·clamp ℓ) = w²
        "rollout_corr/chi2_token": stats["token_weight_sq"] / pooled - 1.0,
        "rollout_corr/chi2_seq": stats["chi2_seq"] / rows,
    }


def offpolicy_metrics(
    stats: Mapping[str, float],
    *,
    legacy_veto: bool | None = None,
) -> dict[str, float | None]:
    """Metrics of one batch (a step, or the whole dump) from its summed row statistics.

    .. math::
        \\mathrm{kl} = \\frac{\\sum_{valid} -\\ell}{V},\\quad
        \\mathrm{k3\\_kl} = \\frac{\\sum_{valid} e^{\\ell} - \\ell - 1}{V},\\quad
        \\chi^2_{token} = \\frac{\\sum_{valid} e^{2\\,\\mathrm{clamp}(\\ell)}}{V} - 1,\\quad
        \\chi^2_{seq} = \\frac{1}{B}\\sum_i e^{2\\,\\mathrm{clamp}(S_i)} - 1

    and likewise for every name of :data:`VERL_OFFPOLICY_METRICS` (docs/metrics.md). rcdiag's own metrics:
    Kish ESS fraction (Σw)² / (N·Σw²) of the token weights w = exp(clamp ℓ) over the V valid tokens
    (``ess_token``) and of the sequence weights exp(clamp S_i) over the rows with a valid token
    (``ess_seq``); veto and catastrophic fractions as in docs/correction.md; |ℓ| mean and max; the share of
    valid tokens with ρ outside [0.9, 1.1] and [0.5, 2]; valid tokens per row (mean over all rows, max).

    Args:
        stats: the :data:`ROW_STATISTICS` summed over the batch's rows.
        legacy_veto: ``None`` for the latest dialect (no veto metrics under verl's names); ``False``
            for legacy without a veto threshold (both 0.0, as verl logged them); ``True`` for legacy
            with a veto threshold (the fractions at that threshold).

    Returns:
        Metric name → value; every value is ``None`` when the batch has no valid token (verl raises
        there), and the quantiles are left for the caller, which holds the sketch.
    """
    rows, valid = stats["rows"], stats["valid_tokens"]
    names = list(VERL_OFFPOLICY_METRICS)
    if legacy_veto is not None:
        names += LEGACY_VETO_METRICS
    names += RCDIAG_METRICS
    if valid == 0:
        return dict.fromkeys(names)
    pooled = valid  # verl's Σm + 1e-8 in float32 (see count_divisor); V ≥ 1 here
    out: dict[str, float | None] = verl_offpolicy_metrics(stats)
    if legacy_veto is not None:
        out["rollout_corr/rollout_is_veto_fraction"] = (
            stats["vetoed_rows"] / rows if legacy_veto else 0.0
        )
        out["rollout_corr/rollout_is_catastrophic_token_fraction"] = (
            stats["catastrophic_tokens"] / pooled if legacy_veto else 0.0
        )
    out.update(
        {
            "rcdiag/veto_fraction": stats["vetoed_rows"] / rows,
            "rcdiag/catastrophic_token_fraction": stats["catastrophic_tokens"] / valid,
            "rcdiag/ess_token": stats["token_weight"] ** 2 / (valid * stats["token_weight_sq"]),
            "rcdiag/ess_seq": stats["seq_weight"] ** 2
            / (stats["nonempty_rows"] * stats["seq_weight_sq"]),
            "rcdiag/abs_log_ratio_mean": stats["abs_log_ratio"] / valid,
            "rcdiag/abs_log_ratio_max": stats["abs_log_ratio_max"],
            "rcdiag/ratio_outside_0.9_1.1": stats["outside_0.9_1.1"] / valid,
            "rcdiag/ratio_outside_0.5_2": stats["outside_0.5_2"] / valid,
            **{f"rcdiag/log_ratio_{name}": None for name in LOG_RATIO_QUANTILES},
            "rcdiag/response_length_mean": valid / rows,
            "rcdiag/response_length_max": stats["length_max"],
            "rcdiag/k3_kl_stderr": clustered_stderr(
                stats["k3"], valid, stats["k3_row_sq"], stats["k3_by_n"], stats["valid_sq"]
            ),
        }
    )
    return out


def clustered_stderr(total: float, count: float, sq: float, cross: float, count_sq: float) -> float:
    """Standard error of a pooled token mean r = total / count, clustered by sequence.

    With per-sequence sums T_i and valid-token counts n_i (a sequence's tokens are not independent:
    they share its prompt and its sampling), the linearised variance of the ratio is

    .. math::
        \\widehat{\\mathrm{Var}}(r) = \\frac{\\sum_i (T_i - r\\,n_i)^2}{(\\sum_i n_i)^2}
        = \\frac{\\sum T_i^2 - 2r \\sum T_i n_i + r^2 \\sum n_i^2}{(\\sum n_i)^2},

    from the summed second moments ``sq`` = ΣT_i², ``cross`` = ΣT_i n_i, ``count_sq`` = Σn_i²
    (docs/diagnosis.md, "Standard errors"). NaN when a sum is not finite.

    Example:
        >>> # two sequences of 2 tokens, T = 1 and 3: r = 1, residuals −1 and 1
        >>> clustered_stderr(4.0, 4.0, 10.0, 8.0, 8.0)
        0.3535533905932738
    """
    r = total / count
    variance = (sq - 2.0 * r * cross + r * r * count_sq) / (count * count)
    if not math.isfinite(variance):
        return math.nan
    return math.sqrt(max(0.0, variance))
