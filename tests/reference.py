"""A slow, deliberately naive reference for the off-policy metrics, written from the formulas in docs/ alone.

It shares no code with ``rcdiag``: it works on PADDED arrays ``[B, T]`` (rollout, old, mask with mask
values 0/1), exactly the layout verl's helper receives, and follows the formulas
(docs/metrics.md and docs/correction.md) line by line with explicit Python
loops over rows and tokens. Speed is irrelevant; every number is meant to be checkable by eye.

Conventions copied from verl (docs/metrics.md):

* ℓ = old − rollout; ρ = exp(ℓ).
* masked_sum(x, m) = Σ (x where m ≠ 0 else 0) · m — values under m = 0 (even NaN / inf) are ignored.
* masked_mean(x, m) = masked_sum(x, m) / (Σ m + 1e-8), per row or pooled over the batch, with the
  denominator evaluated as torch does for verl's integer mask: an int64 sum plus a Python float is a
  float32 tensor, so the denominator is float32(n + 1e-8) (= n for n ≥ 1). See :func:`denominator`.
* Row means run over ALL B rows, empty rows included (their masked means are exactly 0).
* Clamp to ±20 only in chi2_token / chi2_seq and in the IS-style weights used by rcdiag's ESS;
  kl and k3_kl use the raw ℓ.

Sums use :func:`math.fsum` (exactly rounded), so the reference is at least as accurate as any
implementation it is compared with; exp(x) − 1 is written literally (rcdiag may use expm1; the
difference is rounding only).
"""

from __future__ import annotations

import math
from collections.abc import Sequence

import numpy as np

EPS = 1e-8
"""verl's masked_mean denominator offset."""


def denominator(count: int) -> float:
    """Σm + 1e-8 for an integer mask summing to ``count``, in float32 as torch computes it."""
    return float(np.float32(count) + np.float32(EPS))


BOUND = 20.0
"""verl's SAFETY_BOUND."""

DEFAULT_TAU = 1e-4
"""rcdiag's default veto threshold for its own ``rcdiag/veto_fraction`` (docs/correction.md)."""

QUANTILES: dict[str, float] = {
    "p0.1": 0.001,
    "p1": 0.01,
    "p50": 0.5,
    "p99": 0.99,
    "p99.9": 0.999,
}
"""rcdiag's log-ratio quantile metrics: name suffix → q."""

VERL_NAMES: tuple[str, ...] = (
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

LEGACY_NAMES: tuple[str, ...] = (
    "rollout_corr/rollout_is_veto_fraction",
    "rollout_corr/rollout_is_catastrophic_token_fraction",
)

RCDIAG_NAMES: tuple[str, ...] = (
    "rcdiag/veto_fraction",
    "rcdiag/catastrophic_token_fraction",
    "rcdiag/ess_token",
    "rcdiag/ess_seq",
    "rcdiag/abs_log_ratio_mean",
    "rcdiag/abs_log_ratio_max",
    "rcdiag/ratio_outside_0.9_1.1",
    "rcdiag/ratio_outside_0.5_2",
    "rcdiag/response_length_mean",
    "rcdiag/response_length_max",
    "rcdiag/k3_kl_stderr",
)

QUANTILE_NAMES: tuple[str, ...] = tuple(f"rcdiag/log_ratio_{name}" for name in QUANTILES)


def _clamp(x: float) -> float:
    return min(max(x, -BOUND), BOUND)


def _as_padded(
    rollout: np.ndarray, old: np.ndarray, mask: np.ndarray
) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    rollout = np.asarray(rollout, dtype=np.float64)  # float32 inputs are upcast, as rcdiag does
    old = np.asarray(old, dtype=np.float64)
    mask = np.asarray(mask)
    if not (rollout.ndim == 2 and rollout.shape == old.shape == mask.shape):
        raise ValueError("rollout, old and mask must share one [B, T] shape")
    if not np.isin(mask, (0, 1)).all():
        raise ValueError("the reference only takes 0/1 masks")
    return rollout, old, mask


def _rows(
    rollout: np.ndarray, old: np.ndarray, mask: np.ndarray
) -> list[tuple[list[float], list[float], list[float]]]:
    """For each row: (valid old values, valid rollout values, valid ℓ values), in column order."""
    out = []
    batch, width = mask.shape
    for i in range(batch):
        olds, rollouts, ells = [], [], []
        for t in range(width):
            if mask[i, t] != 0:  # anything under m = 0 is never even read
                o = float(old[i, t])
                r = float(rollout[i, t])
                olds.append(o)
                rollouts.append(r)
                ells.append(o - r)
        out.append((olds, rollouts, ells))
    return out


def valid_log_ratios(rollout: np.ndarray, old: np.ndarray, mask: np.ndarray) -> list[float]:
    """Every valid ℓ of the batch (row by row, column order)."""
    rollout, old, mask = _as_padded(rollout, old, mask)
    return [ell for _, _, ells in _rows(rollout, old, mask) for ell in ells]


def exact_quantile(values: Sequence[float], q: float) -> float:
    """The order statistic sorted(values)[floor(q · (n − 1))] (0-based)."""
    ordered = sorted(values)
    return ordered[math.floor(q * (len(ordered) - 1))]


def reference_quantiles(
    rollout: np.ndarray, old: np.ndarray, mask: np.ndarray
) -> dict[str, float | None]:
    """Exact ``rcdiag/log_ratio_pX`` order statistics (None when the batch has no valid token)."""
    values = valid_log_ratios(rollout, old, mask)
    return {
        f"rcdiag/log_ratio_{name}": (exact_quantile(values, q) if values else None)
        for name, q in QUANTILES.items()
    }


def reference_metrics(
    rollout: np.ndarray,
    old: np.ndarray,
    mask: np.ndarray,
    *,
    dialect: str = "latest",
    veto_threshold: float | None = None,
) -> dict[str, float | None]:
    """Every non-quantile metric of one batch, straight from the formulas in docs/.

    Args:
        rollout, old, mask: padded ``[B, T]`` arrays; mask holds 0/1.
        dialect: ``"latest"`` (no verl veto metrics) or ``"legacy"`` (adds the two veto metrics of
            docs/correction.md, 0.0 when ``veto_threshold`` is None).
        veto_threshold: τ. rcdiag's own veto metrics use τ, or 1e-4 when None.

    Returns:
        Name → value; all None when the batch has no valid token (verl raises; rcdiag reports null).
    """
    rollout, old, mask = _as_padded(rollout, old, mask)
    names = (
        list(VERL_NAMES) + (list(LEGACY_NAMES) if dialect == "legacy" else []) + list(RCDIAG_NAMES)
    )
    rows = _rows(rollout, old, mask)
    batch = len(rows)
    total_valid = sum(len(ells) for _, _, ells in rows)  # V = Σ m (mask is 0/1)
    if total_valid == 0:
        return dict.fromkeys(names)

    pooled_den = denominator(total_valid)  # verl's pooled masked_mean denominator

    # ---- per-row quantities (docs/metrics.md): n_i, S_i, a_i, b_i, d_i -------------------------------
    n = [len(ells) for _, _, ells in rows]
    seq_sum = [math.fsum(ells) for _, _, ells in rows]  # S_i, 0 for an empty row
    a = [math.fsum(olds) / denominator(len(olds)) for olds, _, _ in rows]  # 0 for an empty row
    b = [math.fsum(rolls) / denominator(len(rolls)) for _, rolls, _ in rows]
    d = [b_i - a_i for a_i, b_i in zip(a, b, strict=True)]

    all_ells = [ell for _, _, ells in rows for ell in ells]

    out: dict[str, float | None] = {}

    # ---- verl's 13 off-policy metrics (docs/metrics.md) ------------------------------------------------
    out["rollout_corr/training_ppl"] = math.fsum(math.exp(-x) for x in a) / batch
    out["rollout_corr/training_log_ppl"] = math.fsum(-x for x in a) / batch
    # kl = pooled masked mean of (rollout − old) = −ℓ, raw (not clamped)
    out["rollout_corr/kl"] = math.fsum(-ell for ell in all_ells) / pooled_den
    # k3 = exp(ℓ) − ℓ − 1, raw ℓ
    out["rollout_corr/k3_kl"] = (
        math.fsum(math.exp(ell) - ell - 1.0 for ell in all_ells) / pooled_den
    )
    out["rollout_corr/rollout_ppl"] = math.fsum(math.exp(-x) for x in b) / batch
    out["rollout_corr/rollout_log_ppl"] = math.fsum(-x for x in b) / batch
    out["rollout_corr/log_ppl_diff"] = math.fsum(d) / batch
    out["rollout_corr/log_ppl_abs_diff"] = math.fsum(abs(x) for x in d) / batch
    out["rollout_corr/log_ppl_diff_max"] = max(d)  # empty rows give d = 0 and take part
    out["rollout_corr/log_ppl_diff_min"] = min(d)
    out["rollout_corr/ppl_ratio"] = math.fsum(math.exp(x) for x in d) / batch
    # chi2 clamps ℓ (token) or S_i (sequence) to ±20 before exponentiating; verl subtracts the 1
    # after its masked mean: masked_mean(ρ²) − 1
    out["rollout_corr/chi2_token"] = (
        math.fsum(math.exp(2.0 * _clamp(ell)) for ell in all_ells) / pooled_den - 1.0
    )
    out["rollout_corr/chi2_seq"] = (
        math.fsum(math.exp(2.0 * _clamp(s)) - 1.0 for s in seq_sum) / batch
    )

    # ---- veto (docs/correction.md): catastrophic = valid token with raw ℓ < log τ ------------------------
    def veto_counts(tau: float) -> tuple[int, int]:
        log_tau = math.log(tau)
        catastrophic_tokens = 0
        vetoed_rows = 0
        for _, _, ells in rows:
            bad = sum(1 for ell in ells if ell < log_tau)
            catastrophic_tokens += bad
            if bad > 0:
                vetoed_rows += 1
        return catastrophic_tokens, vetoed_rows

    if dialect == "legacy":
        if veto_threshold is None:  # verl logged the veto metrics as 0.0 when the veto was off
            out["rollout_corr/rollout_is_veto_fraction"] = 0.0
            out["rollout_corr/rollout_is_catastrophic_token_fraction"] = 0.0
        else:
            tokens, vetoed = veto_counts(veto_threshold)
            out["rollout_corr/rollout_is_veto_fraction"] = vetoed / batch
            out["rollout_corr/rollout_is_catastrophic_token_fraction"] = tokens / pooled_den

    # ---- rcdiag's own metrics -------------------------------------------------------------------
    tau = DEFAULT_TAU if veto_threshold is None else veto_threshold
    tokens, vetoed = veto_counts(tau)
    out["rcdiag/veto_fraction"] = vetoed / batch
    out["rcdiag/catastrophic_token_fraction"] = tokens / total_valid  # exactly / V, no eps

    # Kish ESS fraction (Σw)² / (N · Σw²)
    w = [math.exp(_clamp(ell)) for ell in all_ells]
    out["rcdiag/ess_token"] = math.fsum(w) ** 2 / (len(w) * math.fsum(x * x for x in w))
    seq_w = [math.exp(_clamp(s)) for s, n_i in zip(seq_sum, n, strict=True) if n_i >= 1]
    out["rcdiag/ess_seq"] = math.fsum(seq_w) ** 2 / (len(seq_w) * math.fsum(x * x for x in seq_w))

    out["rcdiag/abs_log_ratio_mean"] = math.fsum(abs(ell) for ell in all_ells) / total_valid
    out["rcdiag/abs_log_ratio_max"] = max(abs(ell) for ell in all_ells)

    def share_outside(lo: float, hi: float) -> float:
        outside = 0
        for ell in all_ells:
            rho = math.exp(ell)
            if rho < lo or rho > hi:
                outside += 1
        return outside / total_valid

    out["rcdiag/ratio_outside_0.9_1.1"] = share_outside(0.9, 1.1)
    out["rcdiag/ratio_outside_0.5_2"] = share_outside(0.5, 2.0)

    out["rcdiag/response_length_mean"] = sum(n) / batch
    out["rcdiag/response_length_max"] = float(max(n))

    # sequence-clustered standard error of k3_kl: sqrt(Σ_i (K_i − r·n_i)²) / Σ n_i, K_i the row's k3 sum
    k3_rows = [math.fsum(math.exp(ell) - ell - 1.0 for ell in ells) for _, _, ells in rows]
    r = math.fsum(k3_rows) / total_valid
    residual = math.fsum((k_i - r * n_i) ** 2 for k_i, n_i in zip(k3_rows, n, strict=True))
    out["rcdiag/k3_kl_stderr"] = math.sqrt(residual) / total_valid

    assert list(out) == names, "reference bug: names out of order"
    return out


def stack_padded(
    batches: Sequence[tuple[np.ndarray, np.ndarray, np.ndarray]],
) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    """Concatenate padded batches row-wise, padding every one to the widest (mask 0, value NaN)."""
    width = max(r.shape[1] for r, _, _ in batches)
    rollouts, olds, masks = [], [], []
    for rollout, old, mask in batches:
        extra = width - rollout.shape[1]
        rows = rollout.shape[0]
        nan = np.full((rows, extra), np.nan)
        rollouts.append(np.concatenate([np.asarray(rollout, np.float64), nan], axis=1))
        olds.append(np.concatenate([np.asarray(old, np.float64), nan], axis=1))
        masks.append(
            np.concatenate([np.asarray(mask), np.zeros((rows, extra), mask.dtype)], axis=1)
        )
    return np.concatenate(rollouts), np.concatenate(olds), np.concatenate(masks)
