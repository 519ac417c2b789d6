"""Detectors of real mismatch: numerics, staleness, drift, tails; correction applies.

Severities come from the metric registry's bands (docs/diagnosis.md); each detector returns a
:class:`~rcdiag.assess.diagnosis.observations.Detection` or None.
"""

from __future__ import annotations

from rcdiag.assess.diagnosis.observations import (
    DETECTOR_LIMITS,
    MISMATCH_DOCS,
    CauseRecord,
    Detection,
    Observations,
)
from rcdiag.assess.findings import shown_ratio
from rcdiag.formatting import fmt, pct, short
from rcdiag.metrics.records import (
    ABS_LOG_RATIO_MEAN,
    CATASTROPHIC_TOKENS,
    CHI2_SEQ,
    ESS_SEQ,
    K3_KL,
    RESPONSE_LENGTH_MEAN,
    VETO_FRACTION,
)
from rcdiag.status import Status, worst


def stale_policy(o: Observations) -> Detection | None:
    if not o.lags:
        return None
    usable = [g for g in o.lags if g["valid_tokens"] >= DETECTOR_LIMITS["min_lag_tokens"]]
    fresh = next((g for g in usable if g["lag"] == 0), None)
    stale = [g for g in usable if g["lag"] > 0]
    if fresh is None or not stale:
        return None
    worst_lag = max(stale, key=lambda g: g["lag"])
    ratio = (worst_lag["k3_kl"] or 0.0) / max(fresh["k3_kl"] or 0.0, 1e-12)
    severity = K3_KL.status(worst_lag["k3_kl"])
    if ratio < DETECTOR_LIMITS["stale_ratio"] or severity in (None, "healthy"):
        return None
    return Detection(
        severity,
        f"the mismatch grows with the policy lag: k3_kl = {fmt(fresh['k3_kl'])} at lag 0, "
        f"{fmt(worst_lag['k3_kl'])} at lag {worst_lag['lag']} (×{fmt(ratio, 2)}): staleness, "
        "not numerics",
        {"by_lag": [dict(g) for g in o.lags], "ratio": ratio},
        "Bound the staleness (fewer optimizer steps between weight syncs) and correct what "
        "remains with a decoupled preset (token-level truncated IS, e.g. decoupled_token_is), "
        "which uses the rollout policy's log-probs as the behaviour policy.",
    )


def growing_drift(o: Observations) -> Detection | None:
    growth = o.k3_growth
    if not growth.significant or growth.relative_change <= DETECTOR_LIMITS["drift_rise"]:
        return None
    recent = max(o.recent_k3_kl or 0.0, growth.after or 0.0)
    level = K3_KL.status(recent) or "healthy"
    severity: Status = "act" if level != "healthy" else "watch"
    evidence = f"{fmt(growth.z, 2)} standard errors wide, p = {fmt(growth.p_value, 2)}"
    first, last = o.first_k3_kl, o.recent_k3_kl
    if growth.shape == "step":
        summary = (
            f"k3_kl steps up from {fmt(growth.before)} to {fmt(growth.after)} at step "
            f"{growth.change_step} ({evidence})"
        )
        where = (
            f"Look at what happened at step {growth.change_step} (a weight sync, a learning-rate "
            "change, a new data mix, an engine restart)."
        )
    else:
        if first and last is not None:
            window = max(1, len(o.k3_steps) // 4)
            medians = "" if window == 1 else f" (medians of the first and last {window} steps)"
            ratio = shown_ratio(first, last)
            rise = f"×{short(ratio)}, from {short(first)} to {short(last)}{medians}"
        else:
            rise = f"from {fmt(growth.before)} to {fmt(growth.after)}"
        span = f"steps {o.k3_steps[0][0]}–{o.k3_steps[-1][0]}"
        summary = f"k3_kl rises steadily over {span}, {rise}; {evidence}"
        where = "Find what changes over training rather than at one step."
    if growth.spikes:
        listed = ", ".join(str(s) for s in growth.spikes)
        summary += f" (left out as isolated spikes: step {listed})"
    if o.lags:
        cause = (
            "It follows the policy lag: bound the staleness. "
            if stale_policy(o) is not None
            else "The recorded policy lag does not explain it. "
        )
    else:
        cause = (
            "A mismatch that grows over steps points to staleness (the rollout policy lagging the "
            "trainer) or to a policy drifting toward tokens the two engines disagree on, not to "
            "engine numerics, which stay flat: record policy_lag in the dump to tell them apart. "
        )
    return Detection(
        severity,
        summary,
        {
            "shape": growth.shape,
            "change_step": growth.change_step,
            "before": growth.before,
            "after": growth.after,
            "p_value": growth.p_value,
            "z": growth.z,
            "steps": growth.steps,
            "spikes": list(growth.spikes),
            "relative_change": growth.relative_change,
        },
        cause
        + where
        + " Meanwhile correct at token level; rcdiag recommend adds geometric-mean rejection as a "
        "safety valve only where a threshold keeps enough of the latest steps.",
    )


def catastrophic_tokens(o: Observations) -> Detection | None:
    share = o.metric(CATASTROPHIC_TOKENS.name)
    level = o.level(CATASTROPHIC_TOKENS, share)
    if level in (None, "healthy"):
        return None
    vetoed = o.metric(VETO_FRACTION.name)
    severity = worst([level, o.level(VETO_FRACTION, vetoed)])
    return Detection(
        severity,
        f"{pct(share)} of tokens have π_train/π_rollout below the veto threshold, in "
        f"{pct(vetoed)} of sequences",
        {"catastrophic_token_fraction": share, "veto_fraction": vetoed},
        "Reject sequences holding such a token: a max criterion (seq_max_k2) in the latest verl, "
        "the token veto in the legacy one.",
    )


def heavy_tail(o: Observations) -> Detection | None:
    q = {p: o.metric(f"rcdiag/log_ratio_{p}") for p in ("p0.1", "p1", "p99", "p99.9")}
    if any(v is None for v in q.values()):
        return None
    inner = (q["p99"] or 0.0) - (q["p1"] or 0.0)
    outer = (q["p99.9"] or 0.0) - (q["p0.1"] or 0.0)
    size = max(abs(q["p0.1"] or 0.0), abs(q["p99.9"] or 0.0))
    if (
        inner <= 0
        or outer / inner < DETECTOR_LIMITS["tail_ratio"]
        or size < DETECTOR_LIMITS["tail_size"]
    ):
        return None
    return Detection(
        "watch",
        f"the log-ratio has heavy tails: p0.1…p99.9 spans {fmt(outer, 3)}, {fmt(outer / inner, 3)}× "
        f"the p1…p99 span (1.3× for a normal law)",
        {**{f"log_ratio_{k}": v for k, v in q.items()}, "tail_ratio": outer / inner},
        "A few tokens carry most of the weight variance: truncate the weights (token-level TIS) "
        "and consider a max criterion for the extreme tokens.",
    )


def long_sequence_compounding(o: Observations) -> Detection | None:
    chi2, ess = o.metric(CHI2_SEQ.name), o.metric(ESS_SEQ.name)
    level = worst([o.level(CHI2_SEQ, chi2), o.level(ESS_SEQ, ess)])
    if level == "healthy":
        return None
    length = o.metric(RESPONSE_LENGTH_MEAN.name)
    return Detection(
        level,
        f"per-token mismatch compounds over ~{fmt(length, 3)} tokens per response: χ²_seq = "
        f"{fmt(chi2)}, ESS_seq = {fmt(ess)}",
        {"chi2_seq": chi2, "ess_seq": ess, "response_length_mean": length},
        "Sequence-level importance weights are unreliable at this length: prefer token-level "
        "truncated IS, and geometric-mean (seq_mean) rather than sequence-sum criteria.",
    )


def position_growth(o: Observations) -> Detection | None:
    early, late = o.position_mean((0, 1, 2, 4)), o.position_mean((32, 64))
    minimum = DETECTOR_LIMITS["min_position_tokens"]
    if early is None or late is None or min(early[1], late[1]) < minimum:
        return None
    (first, _), (last, _) = early, late
    level = o.level(ABS_LOG_RATIO_MEAN, last)
    if level in (None, "healthy") or last < DETECTOR_LIMITS["position_ratio"] * first:
        return None
    growth = "the first positions agree exactly" if first == 0 else f"×{fmt(last / first, 2)}"
    return Detection(
        level,
        f"the mismatch grows along the response: mean |Δ log p| = {fmt(first)} at positions 0–7 "
        f"and {fmt(last)} from position 32 on ({growth}), where numerics alone are even over "
        "the positions",
        {"early": first, "late": last, "ratio": last / first if first else None},
        "Precision is lost as the context grows, not in the logits: look at an fp8 or otherwise "
        "quantised KV cache, chunked prefill, long-context attention kernels and rotary "
        "embeddings computed in low precision (compare a run with the KV cache in bf16; the "
        "report's position profile shows where it starts). Meanwhile prefer token-level "
        "truncated IS: sequence-level weights degrade fastest when late tokens disagree.",
    )


def numeric_mismatch(o: Observations) -> Detection | None:
    k3, gap = o.metric(K3_KL.name), o.metric(ABS_LOG_RATIO_MEAN.name)
    fresh = next((g for g in o.lags or () if g["lag"] == 0), None)
    if fresh is not None:  # staleness is told apart: numerics are what the lag-0 rows show
        k3, gap = fresh["k3_kl"], fresh["abs_log_ratio_mean"]
    level = worst([o.level(K3_KL, k3), o.level(ABS_LOG_RATIO_MEAN, gap)])
    if level == "healthy":
        return None
    if growing_drift(o) is not None and stale_policy(o) is None:
        return None  # a growing mismatch is drift or staleness; numerics stay flat
    advice = (
        "Correct it with token-level truncated importance sampling (a decoupled token-IS preset); "
        "at the source, match precisions (fp32 lm_head / logits in the engine) where possible."
    )
    if position_growth(o) is not None:
        advice = (
            "Correct it with token-level truncated importance sampling (a decoupled token-IS "
            "preset); at the source, look at what grows along the response (above), not the "
            "lm_head."
        )
    elif o.level(K3_KL, k3) == "act":  # past the band that precision differences stay within
        advice = (
            f"A flat k3_kl of {fmt(k3)} is more than bf16 or fp8 arithmetic usually gives: first "
            "check that the engine runs the trainer's current weights (a weight sync that failed "
            "or was partial, a LoRA adapter not loaded or not merged, another checkpoint or "
            "quantisation). " + advice
        )
    return Detection(
        level,
        f"the engine and the trainer compute different probabilities for the same tokens: "
        f"k3_kl = {fmt(k3)}, mean |Δ log p| = {fmt(gap)}",
        {"k3_kl": k3, "abs_log_ratio_mean": gap},
        advice,
    )


MISMATCH_CAUSES: tuple[CauseRecord, ...] = (
    CauseRecord(
        "stale_policy",
        "mismatch",
        "The rollout policy is stale",
        stale_policy,
        ("stale_ratio", "min_lag_tokens"),
        MISMATCH_DOCS,
    ),
    CauseRecord(
        "growing_drift",
        "mismatch",
        "The mismatch grows during training",
        growing_drift,
        ("drift_rise",),
        MISMATCH_DOCS,
    ),
    CauseRecord(
        "catastrophic_tokens",
        "mismatch",
        "Catastrophic tokens",
        catastrophic_tokens,
        (),
        MISMATCH_DOCS,
    ),
    CauseRecord(
        "heavy_tail",
        "mismatch",
        "Heavy tails in the log-ratio",
        heavy_tail,
        ("tail_ratio", "tail_size"),
        MISMATCH_DOCS,
    ),
    CauseRecord(
        "long_sequence_compounding",
        "mismatch",
        "The mismatch compounds over long responses",
        long_sequence_compounding,
        (),
        MISMATCH_DOCS,
    ),
    CauseRecord(
        "position_growth",
        "mismatch",
        "The mismatch grows along the response",
        position_growth,
        ("position_ratio", "min_position_tokens"),
        MISMATCH_DOCS,
    ),
    CauseRecord(
        "numeric_mismatch",
        "mismatch",
        "The engines' numerics differ",
        numeric_mismatch,
        (),
        MISMATCH_DOCS,
    ),
)
"""Real mismatch, tested when no dump bug fired; every one that fires is reported."""
