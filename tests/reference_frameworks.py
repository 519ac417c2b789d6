"""A slow, naive reference for other frameworks' metrics and correction modes, written from each
framework's code as docs/frameworks.md describes it, sharing no code with ``rcdiag``.

A batch is a list of rows ``(rollout, old, mask)`` of Python floats (mask 0/1), as the framework's
padded tensors hold them; every formula loops over rows and tokens in plain Python (``math.fsum``).
"""

from __future__ import annotations

import math
from collections.abc import Sequence

Row = tuple[Sequence[float], Sequence[float], Sequence[int]]


def _exp(x: float) -> float:
    try:
        return math.exp(x)
    except OverflowError:
        return math.inf


def _valid(row: Row) -> list[tuple[float, float]]:
    rollout, old, mask = row
    return [(r, o) for r, o, m in zip(rollout, old, mask, strict=True) if m]


def _ells(row: Row) -> list[float]:
    return [o - r for r, o in _valid(row)]


def _all_ells(rows: Sequence[Row]) -> list[float]:
    return [e for row in rows for e in _ells(row)]


def _mean(values: Sequence[float]) -> float:
    return math.fsum(values) / len(values)


def _sample_mean(values: Sequence[float]) -> float:
    """slime's per-sample masked mean: Σ / max(n, 1)."""
    return math.fsum(values) / max(len(values), 1)


def trl_ratios(
    rows: Sequence[Row], mode: str, cap: float, low: float | None = None
) -> list[list[float]]:
    """TRL's ratio per valid token (token modes) or one per row (sequence modes): truncate clamps
    to [low, cap] (no lower bound when low is None), mask zeroes a ratio outside."""
    out = []
    for row in rows:
        ells = _ells(row)
        sequence = mode.startswith("sequence")
        values = [_exp(math.fsum(ells))] if sequence else [_exp(e) for e in ells]
        floor = -math.inf if low is None else low
        if mode.endswith("truncate"):
            values = [max(min(v, cap), floor) for v in values]
        else:
            values = [0.0 if v > cap or v < floor else v for v in values]
        out.append(values)
    return out


def trl(
    rows: Sequence[Row], mode: str = "sequence_mask", cap: float = 3.0, low: float | None = None
) -> dict[str, float]:
    ells = _all_ells(rows)
    flat = [v for values in trl_ratios(rows, mode, cap, low) for v in values]
    return {
        "trl/sampling/sampling_logp_difference/mean": _mean([abs(e) for e in ells]),
        "trl/sampling/sampling_logp_difference/max": max(abs(e) for e in ells),
        "trl/sampling/importance_sampling_ratio/min": min(flat),
        "trl/sampling/importance_sampling_ratio/mean": _mean(flat),
        "trl/sampling/importance_sampling_ratio/max": max(flat),
    }


def slime(rows: Sequence[Row]) -> dict[str, float]:
    b = len(rows)
    per: dict[str, list[float]] = {}

    def add(name: str, value: float) -> None:
        per.setdefault(name, []).append(value)

    for row in rows:
        valid = _valid(row)
        ells = _ells(row)
        n = len(valid)
        add("train_rollout_logprob_abs_diff", _sample_mean([abs(e) for e in ells]))
        if n == 0:  # every per-sample mean of an empty sample is 0
            for name in (
                "mis_training_log_ppl",
                "mis_training_ppl",
                "mis_rollout_log_ppl",
                "mis_rollout_ppl",
                "mis_kl",
                "mis_k3_kl",
                "mis_log_ppl_diff",
                "mis_log_ppl_abs_diff",
                "mis_ppl_ratio",
                "mis_chi2_token",
                "mis_chi2_seq",
            ):
                add(name, 0.0)
            continue
        train = _mean([o for _, o in valid])
        rollout = _mean([r for r, _ in valid])
        add("mis_training_log_ppl", -train)
        add("mis_training_ppl", math.exp(-train))
        add("mis_rollout_log_ppl", -rollout)
        add("mis_rollout_ppl", math.exp(-rollout))
        add("mis_kl", _mean([r - o for r, o in valid]))
        add("mis_k3_kl", _mean([_exp(e) - e - 1 for e in ells]))
        add("mis_log_ppl_diff", rollout - train)
        add("mis_log_ppl_abs_diff", abs(rollout - train))
        add("mis_ppl_ratio", math.exp(rollout - train))
        clamped = [max(-20.0, min(20.0, e)) for e in ells]
        add("mis_chi2_token", _mean([math.exp(2 * c) for c in clamped]) - 1.0)
        s = max(-20.0, min(20.0, math.fsum(ells)))
        add("mis_chi2_seq", math.exp(2 * s) - 1.0)
    return {f"slime/{k}": math.fsum(v) / b for k, v in per.items()}


def nemo_rl(rows: Sequence[Row]) -> dict[str, float]:
    valid = [pair for row in rows for pair in _valid(row)]
    mult, gen, policy, js = [], [], [], []
    for r, o in valid:
        mult.append(_exp(abs(r - o)))
        logr = o - r  # calculate_kl(logprobs=generation, reference=prev): logr = prev − gen
        gen.append(_exp(logr) - 1 - logr)
        logr = r - o
        policy.append(_exp(logr) - 1 - logr)
        mixture = math.log(0.5 * math.exp(o) + 0.5 * math.exp(r))
        a, b = o - mixture, r - mixture
        js.append(0.5 * (math.exp(a) - a - 1) + 0.5 * (math.exp(b) - b - 1))
    weights = [_exp(o - r) for r, o in valid]
    per_row = [_mean([_exp(abs(e)) for e in _ells(row)]) for row in rows if _ells(row)]
    return {
        "nemo_rl/sampling_importance_ratio": _mean([0.0 if math.isinf(w) else w for w in weights]),
        "nemo_rl/max_seq_mult_prob_error": max(per_row),
        "nemo_rl/mean_seq_mult_prob_error": _mean(per_row),
        "nemo_rl/min_seq_mult_prob_error": min(per_row),
        "nemo_rl/token_mult_prob_error": _mean(mult),
        "nemo_rl/gen_kl_error": _mean(gen),
        "nemo_rl/policy_kl_error": _mean(policy),
        "nemo_rl/js_divergence_error": _mean(js),
    }


def openrlhf(rows: Sequence[Row]) -> dict[str, float]:
    valid = [pair for row in rows for pair in _valid(row)]
    return {"openrlhf/vllm_kl": _mean([r - o for r, o in valid])}


def _sample_std(values: Sequence[float]) -> float:
    """torch's Tensor.std(): N − 1 (0.0 here for one value, where torch gives nan)."""
    if len(values) < 2:
        return 0.0
    mean = _mean(values)
    return math.sqrt(math.fsum((v - mean) ** 2 for v in values) / (len(values) - 1))


def prime_rl(rows: Sequence[Row]) -> dict[str, float]:
    """train.py gathers e^ℓ − ℓ − 1 of every valid token under mismatch_kl/all; compute_stats."""
    kls = [_exp(e) - e - 1 for e in _all_ells(rows)]
    return {
        "prime_rl/mismatch_kl/all/mean": _mean(kls),
        "prime_rl/mismatch_kl/all/std": _sample_std(kls),
        "prime_rl/mismatch_kl/all/max": max(kls),
    }


def areal(rows: Sequence[Row], upper: float = 5.0) -> dict[str, float | None]:
    """apply_rejection_sampling at its defaults (token, mask, ratio, upper 5): a token with
    ρ > upper leaves the loss mask; behave_mask = weight > 0 on what is left."""
    ells = _all_ells(rows)
    kept = [e for e in ells if 0.0 < _exp(e) <= upper]
    weights = [_exp(e) for e in kept]
    return {
        "areal/behave_imp_weight/avg": _mean(weights) if kept else None,
        "areal/behave_imp_weight/min": min(weights) if kept else None,
        "areal/behave_imp_weight/max": max(weights) if kept else None,
        "areal/behave_approx_kl/avg": _mean(kept) if kept else None,
        "areal/behave_approx_kl/min": min(kept) if kept else None,
        "areal/behave_approx_kl/max": max(kept) if kept else None,
        "areal/rs_filtered_fraction": sum(1 for e in ells if _exp(e) > upper) / len(ells),
    }


def skyrl(rows: Sequence[Row]) -> dict[str, float]:
    ells = _all_ells(rows)
    ratios = [math.exp(max(-20.0, min(20.0, e))) for e in ells]
    diffs = [abs(e) for e in ells]  # |rollout − policy log-prob| under the loss mask
    return {
        "skyrl/is_ratio_mean": _mean(ratios),
        "skyrl/is_ratio_max": max(ratios),
        "skyrl/policy/rollout_train_logprobs_abs_diff_mean": _mean(diffs),
        "skyrl/policy/rollout_train_logprobs_abs_diff_std": _sample_std(diffs),
        "skyrl/policy/rollout_train_logprobs_abs_diff_max": max(diffs),
        "skyrl/policy/rollout_train_logprobs_abs_diff_min": min(diffs),
    }


def open_instruct_rho(
    rows: Sequence[Row],
    clamp: tuple[float, float] = (0.0, 2.0),
    drop: tuple[float, float] = (0.0, 0.0),
    sequence: bool = False,
) -> tuple[list[list[float]], list[list[bool]], list[list[bool]], list[list[bool]]]:
    """compute_rho_correction per row: (weights, clipped, dropped low, dropped high) per token."""
    weights, clipped, lows, highs = [], [], [], []
    for row in rows:
        ells = [max(-10.0, min(10.0, e)) for e in _ells(row)]
        geometric = math.exp(_sample_mean(ells))
        rhos = [geometric] * len(ells) if sequence else [math.exp(e) for e in ells]
        w_row, c_row, l_row, h_row = [], [], [], []
        for r in rhos:
            low = drop[0] > 0 and r < drop[0]
            high = drop[1] > 0 and r > drop[1]
            c = r
            if clamp[0] > 0:
                c = max(c, clamp[0])
            if clamp[1] > 0:
                c = min(c, clamp[1])
            w_row.append(0.0 if low or high else c)
            c_row.append(c != r)
            l_row.append(low)
            h_row.append(high)
        weights.append(w_row)
        clipped.append(c_row)
        lows.append(l_row)
        highs.append(h_row)
    return weights, clipped, lows, highs


def open_instruct(rows: Sequence[Row]) -> dict[str, float]:
    diffs = [abs(e) for e in _all_ells(rows)]
    valid = [pair for row in rows for pair in _valid(row)]
    weights, clipped, lows, highs = open_instruct_rho(rows)
    n = len(diffs)

    def share(flags: list[list[bool]]) -> float:
        return sum(1 for f in flags for x in f if x) / n

    return {
        "open_instruct/debug/vllm_vs_local_logprob_diff_mean": _mean(diffs),
        "open_instruct/debug/vllm_vs_local_logprob_diff_max": max(diffs),
        "open_instruct/debug/vllm_vs_local_logprob_diff_std": _sample_std(diffs),
        # exp(vllm) · (vllm − local), averaged over the valid tokens
        "open_instruct/debug/vllm_local_reverse_kl": _mean(
            [math.exp(r) * (r - o) for r, o in valid]
        ),
        "open_instruct/val/rho_weight": math.fsum(x for w in weights for x in w) / n,
        "open_instruct/val/rho_clipfrac": share(clipped),
        "open_instruct/val/rho_drop_frac": (share(lows) + share(highs)),
        "open_instruct/val/rho_drop_low_frac": share(lows),
        "open_instruct/val/rho_drop_high_frac": share(highs),
    }


METRICS = {
    "trl": trl,
    "slime": slime,
    "nemo_rl": nemo_rl,
    "openrlhf": openrlhf,
    "prime_rl": prime_rl,
    "areal": areal,
    "skyrl": skyrl,
    "open_instruct": open_instruct,
}


# ------------------------------------------------------------------------------------------------
# Correction modes: per valid token, (weight, kept) as the framework's code applies it


def _clamp(x: float, bound: float | None) -> float:
    return x if bound is None else max(-bound, min(bound, x))


def _row_log(ells: Sequence[float], level: str) -> float:
    total = math.fsum(ells)
    return total if level == "sequence" else total / max(len(ells), 1)


def slime_tis_weights(
    rows: Sequence[Row], low: float, high: float, icepop: bool
) -> list[list[float]]:
    out = []
    for row in rows:
        ratios = [_exp(e) for e in _ells(row)]
        if icepop:
            out.append([r if low <= r <= high else 0.0 for r in ratios])
        else:
            out.append([min(max(r, low), high) for r in ratios])
    return out


def slime_mis(
    rows: Sequence[Row], options: dict
) -> tuple[list[list[float]], list[list[int]], float]:
    """compute_mis_weights of mis.py: (weights before batch normalisation, modified masks, μ —
    the weights slime applies are weights / μ)."""
    lower = (
        options["tis_lower_bound"]
        if options["tis_lower_bound"] is not None
        else 1 / options["tis_upper_bound"]
    )
    upper = options["tis_upper_bound"]
    rs_lo = options.get("rs_lower_bound") if options.get("rs_lower_bound") is not None else lower
    rs_hi = options.get("rs_upper_bound") if options.get("rs_upper_bound") is not None else upper

    def level_ratio(ells: list[float], level: str) -> list[float]:
        if level == "token":
            return [math.exp(_clamp(e, 20.0)) for e in ells]
        return [math.exp(_clamp(_row_log(ells, level), 20.0))] * len(ells)

    weights, masks = [], []
    for row in rows:
        ells = _ells(row)
        w = level_ratio(ells, options["tis_level"])
        keep = [1] * len(ells)
        mode = options["tis_mode"]
        if mode == "truncate":
            w = [min(max(x, 0.0), upper) for x in w]
        elif mode == "clip":
            w = [min(max(x, lower), upper) for x in w]
        else:
            keep = [k if lower <= x <= upper else 0 for k, x in zip(keep, w, strict=True)]
        if options["use_rs"]:
            rs = level_ratio(ells, options["rs_level"])
            keep = [k if rs_lo <= x <= rs_hi else 0 for k, x in zip(keep, rs, strict=True)]
            tau = options.get("rs_veto_threshold")
            if tau is not None and any(e < math.log(tau) for e in ells):
                keep = [0] * len(ells)
        weights.append(w)
        masks.append(keep)
    mu = 1.0
    if options["tis_batch_normalize"]:
        if options["tis_level"] == "token":
            mu = math.fsum(x for w in weights for x in w) / max(sum(len(w) for w in weights), 1)
        else:
            mu = math.fsum(_sample_mean(w) for w in weights) / len(weights)
        mu = mu if mu > 1e-8 else 1.0
    return weights, masks, mu


def openrlhf_weights(rows: Sequence[Row], kind: str, low: float, high: float) -> list[list[float]]:
    out = []
    for row in rows:
        ells = _ells(row)
        ratios = [_exp(e) for e in ells]
        if kind == "tis":
            out.append([min(max(r, low), high) for r in ratios])
        elif kind == "icepop":
            out.append([r if low <= r <= high else 0.0 for r in ratios])
        else:
            geo = _exp(_sample_mean(ells))
            inside = low <= geo <= high
            out.append([r if inside else 0.0 for r in ratios])
    return out


def openrlhf_logged(rows: Sequence[Row], kind: str, low: float, high: float) -> dict[str, float]:
    """PolicyLoss.forward's vllm_kl and is_filter_ratio: the share of valid tokens outside the band
    (token level), or of rows (seq level: filtered.float().mean() over the batch's rows)."""
    valid = [pair for row in rows for pair in _valid(row)]
    if kind == "seq-mask-tis":
        geos = [_exp(_sample_mean(_ells(row))) for row in rows]
        share = sum(1 for g in geos if not low <= g <= high) / len(rows)
    else:
        share = sum(1 for e in _all_ells(rows) if not low <= _exp(e) <= high) / len(valid)
    return {
        "openrlhf/vllm_kl": _mean([r - o for r, o in valid]),
        "openrlhf/is_filter_ratio": share,
    }


def summary(
    rows: Sequence[Row],
    raw: list[list[float]],
    weights: list[list[float]] | None,
    keep: list[list[int]],
    mu: float = 1.0,
) -> dict[str, float | None]:
    """rcdiag's comparison figures from per-token raw ratios, weights and keep flags."""
    valid = sum(len(k) for k in keep)
    nonempty = sum(1 for k in keep if k)
    kept = sum(sum(k) for k in keep)
    out: dict[str, float | None] = {
        "kept_token_share": kept / valid,
        "kept_sequence_share": sum(1 for k in keep if k and all(k)) / nonempty,
        "rejected_sequence_share": sum(1 for k in keep if k and not any(k)) / nonempty,
        "weight_mass_removed": None,
        "ess": None,
        "max_weight": None,
    }
    if kept == 0:
        return out
    if weights is None:
        out["ess"] = 1.0
        return out
    kr = math.fsum(
        r for rr, kk in zip(raw, keep, strict=True) for r, k in zip(rr, kk, strict=True) if k
    )
    kw = [w for ww, kk in zip(weights, keep, strict=True) for w, k in zip(ww, kk, strict=True) if k]
    applied = math.fsum(kw)
    out["weight_mass_removed"] = 1.0 if math.isinf(kr) else ((kr - applied) / kr if kr > 0 else 0.0)
    squares = math.fsum(w * w for w in kw)
    out["ess"] = applied * applied / (kept * squares) if squares > 0 else math.nan
    out["max_weight"] = max(kw) / mu
    return out


def slime_mis_metrics(rows: Sequence[Row], options: dict) -> dict[str, float]:
    """The mis_ metrics compute_mis_weights logs (mis.py; the mis_ prefix added by
    compute_mis_weights_with_cp), each reduced per sample over the loss mask before rejection,
    summed and divided by the sample count; plus train_rollout_logprob_abs_diff and the helper's
    perplexity metrics (:func:`slime`)."""
    lower = (
        options["tis_lower_bound"]
        if options["tis_lower_bound"] is not None
        else 1 / options["tis_upper_bound"]
    )
    upper = options["tis_upper_bound"]
    rs_lo = options["rs_lower_bound"] if options["rs_lower_bound"] is not None else lower
    rs_hi = options["rs_upper_bound"] if options["rs_upper_bound"] is not None else upper
    after, _, mu = slime_mis(rows, options)
    mode = options["tis_mode"]
    per: dict[str, list[float]] = {}

    def add(name: str, values: list[float]) -> None:
        per.setdefault(f"mis_{name}", []).append(_sample_mean(values))

    def ratio(ells: list[float], level: str) -> list[float]:
        if level == "token":
            return [math.exp(_clamp(e, 20.0)) for e in ells]
        return [math.exp(_clamp(_row_log(ells, level), 20.0))] * len(ells)

    for row, w_after in zip(rows, after, strict=True):
        ells = _ells(row)
        before = ratio(ells, options["tis_level"])
        add("tis_weight_before_bound", before)
        if mode == "truncate":
            add("tis_truncate_fraction", [float(x > upper) for x in before])
        else:
            add(f"tis_{mode}_fraction_low", [float(x < lower) for x in before])
            add(f"tis_{mode}_fraction_high", [float(x > upper) for x in before])
        add("tis_weight_after_bound", w_after)
        if options["use_rs"]:
            rs = ratio(ells, options["rs_level"])
            add("rs_mask_fraction_low", [float(x < rs_lo) for x in rs])
            add("rs_mask_fraction_high", [float(x > rs_hi) for x in rs])
            tau = options["rs_veto_threshold"]
            if tau is not None:
                bad = [float(e < math.log(tau)) for e in ells]
                add("rs_catastrophic_token_fraction", bad)
                add("rs_catastrophic_seq_fraction", [float(any(bad))] * len(ells))
        add("is_ratio_mean_after_tis_rs", w_after)
        if options["tis_batch_normalize"]:
            add("batch_norm_factor", [mu] * len(ells))
        final = [x / mu for x in w_after]
        add("is_ratio_mean_final", final)
        add("is_ratio_min_final", [min(final)] * len(ells) if final else [])
        add("is_ratio_max_final", [max(final)] * len(ells) if final else [])
    out = {f"slime/{k}": math.fsum(v) / len(rows) for k, v in per.items()}
    return {**slime(rows), **out}
