"""A slow, naive reference for the correction modes of NeMo-RL, SkyRL, AReaL and prime-rl, written
from each framework's code as docs/frameworks.md describes it, sharing no code with ``rcdiag``
(the rows and helpers of :mod:`reference_frameworks`)."""

from __future__ import annotations

import math
from collections.abc import Sequence

from reference_frameworks import Row, _all_ells, _ells, _exp, _mean, _sample_mean, _valid, prime_rl


def nemo_mode(
    rows: Sequence[Row],
    kind: str | None = None,
    low: float | None = None,
    high: float | None = None,
    threshold: float | None = None,
    use_is: bool = True,
) -> tuple[list[list[float]] | None, list[list[int]], dict[str, float]]:
    """ClippedPGLossFn's weights (tokens), compute_and_apply_seq_logprob_error_masking's kept rows,
    and the metrics logged for the mode: (weights or None, keep flags, metrics)."""
    weights, keep = [], []
    oob_tokens = oob_rows = masked = 0
    after: list[float] = []
    lo = 0.0 if low is None else low
    hi = math.inf if high is None else high
    for row in rows:
        ells = _ells(row)
        ratios = [_exp(e) for e in ells]
        if kind == "tis":
            w = [min(max(r, lo), hi) for r in ratios]
        elif kind == "icepop":
            w = [r if lo <= r <= hi else 0.0 for r in ratios]
        elif kind == "seq-mask-tis":
            geo = _exp(_sample_mean(ells))
            w = [r if lo <= geo <= hi else 0.0 for r in ratios]
            oob_rows += not lo <= geo <= hi
        else:
            w = ratios
        oob_tokens += sum(1 for r in ratios if r < lo or r > hi)
        weights.append(w)
        error = _mean([_exp(abs(e)) for e in ells]) if ells else 0.0
        kept = threshold is None or error <= threshold
        masked += not kept
        if kept and ells:
            after.append(error)
        keep.append([int(kept)] * len(ells))
    n = sum(len(w) for w in weights)
    metrics = {
        "nemo_rl/sampling_importance_ratio": math.fsum(
            0.0 if math.isinf(x) else x for w in weights for x in w
        )
        / n
    }
    if kind is not None:
        share = oob_rows / len(rows) if kind == "seq-mask-tis" else oob_tokens / n
        metrics["nemo_rl/is_oob_ratio"] = share
    if threshold is not None:
        metrics["nemo_rl/max_seq_mult_prob_error_after_mask"] = max(after, default=0.0)
        metrics["nemo_rl/mean_seq_mult_prob_error_after_mask"] = _mean(after) if after else 0.0
        metrics["nemo_rl/min_seq_mult_prob_error_after_mask"] = min(after, default=0.0)
        metrics["nemo_rl/num_masked_seqs"] = float(masked)
    return (weights if use_is else None), keep, metrics


def skyrl_mode(
    rows: Sequence[Row],
    tis: str | None = None,
    token_cap: float = 2.0,
    seq_cap: float = 5.0,
    seq_mask: str | None = None,
    geo: tuple[float, float] = (0.99, 1.01),
    product: tuple[float, float] = (0.5, 2.0),
    outlier: tuple[float | None, float | None] = (None, None),
    token_mask: tuple[float, float] | None = None,
) -> tuple[list[list[float]] | None, list[list[int]], dict[str, float]]:
    """compute_off_policy_correction (one mechanism or several, in SkyRL's order): per token
    (weights or None, kept flags) and the metrics it logs. Ratios are exp(clamp(·, ±20))."""

    def ex(x: float) -> float:
        return math.exp(max(-20.0, min(20.0, x)))

    weights, keep = [], []
    counts = dict.fromkeys(
        ("tis", "seq", "seq_over", "seq_under", "out", "out_over", "out_under", "tok"), 0
    )
    for row in rows:
        ells = _ells(row)
        ratios = [ex(e) for e in ells]
        kept = [1] * len(ells)
        over = any(outlier[1] is not None and r > outlier[1] for r in ratios)
        under = any(outlier[0] is not None and r < outlier[0] for r in ratios)
        if outlier != (None, None):
            counts["out"] += over or under
            counts["out_over"] += over
            counts["out_under"] += under
            if over or under:
                kept = [0] * len(ells)
        if token_mask is not None:
            bad = [not token_mask[0] <= r <= token_mask[1] for r in ratios]
            counts["tok"] += sum(bad)
            kept = [0 if b else k for k, b in zip(kept, bad, strict=True)]
        if tis == "token":
            counts["tis"] += sum(1 for r in ratios if r > token_cap)
            weights.append([min(r, token_cap) for r in ratios])
        elif tis == "sequence":
            seq = ex(math.fsum(ells))
            counts["tis"] += seq > seq_cap
            weights.append([min(seq, seq_cap)] * len(ells))
        if seq_mask is not None:
            # SkyRL computes the row statistic over the tokens the earlier masks kept
            live = [e for e, k in zip(ells, kept, strict=True) if k]
            if seq_mask == "geometric":
                stat, (lo, hi) = ex(math.fsum(live) / max(len(live), 1)), geo
            else:
                stat, (lo, hi) = ex(math.fsum(live)), product
            counts["seq"] += not lo <= stat <= hi
            counts["seq_over"] += stat > hi
            counts["seq_under"] += stat < lo
            if not lo <= stat <= hi:
                kept = [0] * len(ells)
        keep.append(kept)
    b, n = len(rows), sum(len(k) for k in keep)
    ells = _all_ells(rows)
    metrics = {
        "skyrl/is_ratio_mean": _mean([ex(e) for e in ells]),
        "skyrl/is_ratio_max": max(ex(e) for e in ells),
    }
    if tis == "token":
        metrics["skyrl/tis_token_clip_high_ratio"] = counts["tis"] / n
    elif tis == "sequence":
        metrics["skyrl/tis_seq_clip_high_ratio"] = counts["tis"] / b
    if seq_mask is not None:
        name = "geo" if seq_mask == "geometric" else "product"
        metrics[f"skyrl/{name}_sequence_mask_masked_ratio"] = counts["seq"] / b
        metrics[f"skyrl/{name}_sequence_mask_over_high_ratio"] = counts["seq_over"] / b
        metrics[f"skyrl/{name}_sequence_mask_under_low_ratio"] = counts["seq_under"] / b
    if outlier != (None, None):
        metrics["skyrl/outlier_seq_masked_ratio"] = counts["out"] / b
        metrics["skyrl/outlier_seq_over_high_ratio"] = counts["out_over"] / b
        metrics["skyrl/outlier_seq_under_low_ratio"] = counts["out_under"] / b
    if token_mask is not None:
        metrics["skyrl/token_mask_ratio"] = counts["tok"] / n
    return (weights if tis else None), keep, metrics


def areal_mode(
    rows: Sequence[Row],
    level: str = "token",
    action: str = "mask",
    metric: str = "ratio",
    agg: str = "mean",
    upper: float = 5.0,
    lower: float | None = None,
) -> tuple[list[list[float]], list[list[int]], dict[str, float | None]]:
    """apply_rejection_sampling + ppo_actor_loss_fn: per token (weight, kept) and the statistics
    the actor logs over behave_mask (kept and weight > 0)."""

    def stat(e: float) -> float:
        if metric == "ratio":
            return _exp(e)
        if metric == "kl_k1":
            return e
        if metric == "kl_k2":
            return e * e / 2
        return _exp(-e) - 1 + e

    def ok(x: float) -> bool:
        return x <= upper and (lower is None or x >= lower)

    lo = 0.0 if lower is None else lower
    weights, keep, filtered = [], [], 0
    for row in rows:
        ells = _ells(row)
        ratios = [_exp(e) for e in ells]
        if level == "token":
            inside = [ok(stat(e)) for e in ells]
            w = ratios
        else:
            if metric == "ratio":
                if agg == "max":
                    a = max(ells, default=0.0)
                else:
                    a = math.fsum(ells) / (max(len(ells), 1) if agg == "mean" else 1)
                value = _exp(a)
                w = [_exp(_sample_mean(ells))] * len(ells)
            else:
                values = [stat(e) for e in ells]
                if agg == "max":
                    value = max(values, default=0.0)
                else:
                    value = math.fsum(values) / (max(len(values), 1) if agg == "mean" else 1)
                w = ratios
            inside = [ok(value)] * len(ells)
        if action == "clamp":
            clamped = [min(max(x, lo), upper) for x in w]
            final = (
                clamped
                if level == "token"
                else [x if i else c for x, c, i in zip(w, clamped, inside, strict=True)]
            )
            filtered += sum(1 for x, f in zip(w, final, strict=True) if x != f)
            kept = [1] * len(ells)
        else:
            final = w
            kept = [int(i) for i in inside]
            filtered += sum(1 for i in inside if not i)
        weights.append(final)
        keep.append(kept)
    chosen = [
        (x, e)
        for row, ww, kk in zip(rows, weights, keep, strict=True)
        for x, e, k in zip(ww, _ells(row), kk, strict=True)
        if k and x > 0
    ]
    n = sum(len(k) for k in keep)
    ws, es = [x for x, _ in chosen], [e for _, e in chosen]
    metrics: dict[str, float | None] = {
        "areal/behave_imp_weight/avg": _mean(ws) if ws else None,
        "areal/behave_imp_weight/min": min(ws) if ws else None,
        "areal/behave_imp_weight/max": max(ws) if ws else None,
        "areal/behave_approx_kl/avg": _mean(es) if es else None,
        "areal/behave_approx_kl/min": min(es) if es else None,
        "areal/behave_approx_kl/max": max(es) if es else None,
        "areal/rs_filtered_fraction": filtered / n,
    }
    return weights, keep, metrics


def prime_ipo(
    rows: Sequence[Row], threshold: float = 0.1
) -> tuple[list[list[float]], list[list[int]], dict[str, float]]:
    """ipo_loss_fn: is_masked = |exp(trainer) − exp(inference)| > threshold; the policy gradient
    weights the kept tokens by the importance ratio; its metrics (the step as one micro-batch)."""
    weights, keep = [], []
    masked_kl, kept_kl = [], []
    for row in rows:
        pairs = _valid(row)
        w = [_exp(o - r) for r, o in pairs]
        k = [int(abs(math.exp(o) - math.exp(r)) <= threshold) for r, o in pairs]
        for (r, o), kk in zip(pairs, k, strict=True):
            e = o - r
            (kept_kl if kk else masked_kl).append(_exp(e) - e - 1)
        weights.append(w)
        keep.append(k)
    n = len(masked_kl) + len(kept_kl)
    metrics = {
        **prime_rl(rows),
        "prime_rl/is_masked/mean": len(masked_kl) / n,
        "prime_rl/masked_mismatch_kl/mean": math.fsum(masked_kl) / max(len(masked_kl), 1),
        "prime_rl/unmasked_mismatch_kl/mean": math.fsum(kept_kl) / max(len(kept_kl), 1),
    }
    return weights, keep, metrics


def openrlhf_gate(
    rows: Sequence[Row], level: str, gating: str, delta: float
) -> tuple[list[list[float]], dict[str, float]]:
    """PolicyLoss.forward with a divergence gate (mask mode, threshold [0, delta]): p, q the
    rollout and training probabilities clamped to [1e-6, 1 − 1e-6]; binary KL or TV per token,
    their mean per row at seq level; kept units weight the loss by ρ, the others by 0."""

    def div(r: float, o: float) -> float:
        p = min(max(math.exp(r), 1e-6), 1 - 1e-6)
        q = min(max(math.exp(o), 1e-6), 1 - 1e-6)
        if gating == "tv":
            return abs(p - q)
        return p * math.log(p / q) + (1 - p) * math.log((1 - p) / (1 - q))

    weights, filtered_tokens, filtered_rows = [], 0, 0
    for row in rows:
        pairs = _valid(row)
        ds = [div(r, o) for r, o in pairs]
        ratios = [_exp(o - r) for r, o in pairs]
        if level == "seq":
            ok = 0.0 <= _sample_mean(ds) <= delta
            filtered_rows += not ok
            weights.append([x if ok else 0.0 for x in ratios])
        else:
            keep = [0.0 <= d <= delta for d in ds]
            filtered_tokens += sum(1 for k in keep if not k)
            weights.append([x if k else 0.0 for x, k in zip(ratios, keep, strict=True)])
    n = sum(len(w) for w in weights)
    share = filtered_rows / len(rows) if level == "seq" else filtered_tokens / n
    valid = [pair for row in rows for pair in _valid(row)]
    metrics = {
        "openrlhf/vllm_kl": _mean([r - o for r, o in valid]),
        "openrlhf/is_filter_ratio": share,
    }
    return weights, metrics
