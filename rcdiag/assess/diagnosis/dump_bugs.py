"""Detectors of dump bugs: the fix is in the pipeline that made the dump (docs/diagnosis.md).

Each takes the :class:`~rcdiag.assess.diagnosis.observations.Observations` of a dump and returns a
:class:`~rcdiag.assess.diagnosis.observations.Detection` or None; :mod:`rcdiag.assess.diagnosis` lists them.
"""

from __future__ import annotations

import math

from rcdiag.assess.diagnosis.observations import (
    DETECTOR_LIMITS,
    DUMP_BUGS_DOCS,
    CauseRecord,
    Detection,
    Observations,
    ratio_z,
)
from rcdiag.formatting import fmt, pct
from rcdiag.metrics.evidence import SHIFTS, fit_slope, mean_gap
from rcdiag.metrics.records import ABS_LOG_RATIO_MAX, KL


def logits_not_logprobs(o: Observations) -> Detection | None:
    valid = o.totals["valid_tokens"]
    share = o.positive_log_probs / valid if valid else 0.0
    if share < DETECTOR_LIMITS["positive_share"]:
        return None
    return Detection(
        "act",
        f"{pct(share)} of valid tokens hold a positive value: a column holds logits or scores, "
        "not log-probabilities (which are ≤ 0)",
        {"positive_share": share, "positive_tokens": o.positive_log_probs},
        "Dump log_softmax(logits) gathered at the sampled token ids for both columns (or name the "
        "right columns with --rollout-col / --training-col).",
    )


def identical_columns(o: Observations) -> Detection | None:
    if o.metric(ABS_LOG_RATIO_MAX.name) != 0.0:
        return None
    return Detection(
        "watch",
        "the two columns are identical at every valid token: there is no mismatch to measure",
        {"valid_tokens": o.totals["valid_tokens"]},
        "Either the trainer never recomputed the log-probs (verl's bypass mode reuses the rollout's "
        "as old_log_probs) or one tensor was written twice. Dump the trainer's own forward pass "
        "(old_log_probs) beside the engine's rollout_log_probs to measure the mismatch.",
    )


def misaligned_tokens(o: Observations) -> Detection | None:
    gaps = {s: mean_gap(dict(o.totals), s) for s in SHIFTS}
    aligned = gaps[0]
    enough = all(o.totals[f"shift_{s}_pairs"] >= DETECTOR_LIMITS["min_pairs"] for s in SHIFTS)
    if aligned is None or not enough:
        return None
    best = min((s for s in SHIFTS if s != 0), key=lambda s: gaps[s] or math.inf)
    neighbour = gaps[best] or math.inf
    ratio = aligned / neighbour
    if ratio < DETECTOR_LIMITS["misaligned_gap_ratio"]:
        return None
    shifted = neighbour < DETECTOR_LIMITS["misaligned_gap_ratio"] * aligned
    if shifted:
        direction = "later" if best > 0 else "earlier"
        finding = (
            f"the training log-probs match the rollout's {abs(best)} position(s) {direction}: "
            f"mean |Δ log p| is {fmt(aligned)} as dumped but {fmt(neighbour)} when shifted by {best}"
        )
    else:
        finding = (
            f"the two columns are no closer at the same position than at neighbouring ones: mean "
            f"|Δ log p| is {fmt(aligned)} as dumped and {fmt(neighbour)} against the next token, "
            "so they do not score the same tokens (the trainer read the wrong logits position, "
            "or every row is paired with another response)"
        )
    return Detection(
        "act",
        finding,
        {
            "alignment_ratio": ratio,
            "best_shift": best if shifted else 0,
            **{f"mean_gap_shift_{s}": gaps[s] for s in SHIFTS},
        },
        "Align the trainer's log-probs with the response tokens: the log-prob of token t comes "
        "from the logits at position t − 1 (logits[:, prompt_len − 1 : −1] scored against "
        "input_ids[:, prompt_len:]), and the response mask starts at the first response token. "
        "If the positions are right, check that each row's two columns come from the same "
        "response (a batch reordered before scoring, or joined to the wrong step). No "
        "importance-sampling setting can repair misaligned log-probs.",
    )


def constant_column(o: Observations) -> Detection | None:
    t = o.totals
    sides = {
        "rollout_log_probs": (t["rollout_min"], t["rollout_max"]),
        "old_log_probs": (t["old_min"], t["old_max"]),
    }
    constant = [
        (name, low) for name, (low, high) in sides.items() if math.isfinite(low) and low == high
    ]
    if not constant or (len(constant) == 2 and constant[0][1] == constant[1][1]):
        return None  # none, or both the same value: identical columns
    if t["valid_tokens"] < DETECTOR_LIMITS["min_pairs"]:
        return None
    names = " and ".join(f"{name} holds {fmt(value)}" for name, value in constant)
    return Detection(
        "act",
        f"{names} at every sampled valid position: a placeholder, not log-probabilities (a "
        "sampled token's log-probability varies from token to token)",
        {f"{name}_value": value for name, value in constant},
        "Make the engine return the log-probability of each sampled token and dump it (verl: "
        "actor_rollout_ref.rollout.calculate_log_probs=True; vLLM and SGLang return them only "
        "when asked), or name the right column with --rollout-col / --training-col.",
    )


def unpaired_rows(o: Observations) -> Detection | None:
    t = o.totals
    informative, unpaired = t["pairing_rows"], t["unpaired_rows"]
    if informative < DETECTOR_LIMITS["min_pairing_rows"]:
        return None
    share = unpaired / informative
    if share < DETECTOR_LIMITS["unpaired_share"]:
        return None
    balance = abs(t["unpaired_ell"]) / t["unpaired_abs"] if t["unpaired_abs"] > 0 else 1.0
    if not balance < DETECTOR_LIMITS["unpaired_balance"]:
        return None  # one-sided: a real mismatch as large as the tokens' spread, not a pairing
    return Detection(
        "act",
        f"in {pct(share)} of the responses ({unpaired:.0f} of {informative:.0f} that can show it) "
        "the two columns are no closer at the same position than at neighbouring ones: the "
        "training log-probs of those rows belong to other responses",
        {
            "unpaired_rows": unpaired,
            "pairing_rows": informative,
            "unpaired_share": share,
            "balance": balance,
        },
        "Pair the two sides by response, not by position in the batch: a batch reordered before "
        "the trainer scored it (length balancing, dynamic batch sizes, sequence packing, "
        "data-parallel gathering), or joined to the wrong step, puts one response's training "
        "log-probs beside another's rollout log-probs. Restore the order (or join on uid and "
        "sample index) and dump again; no correction applies to unpaired rows.",
    )


def kl_z(o: Observations) -> float:
    """z-score of kl = −Σℓ / V, clustered by sequence."""
    t = o.totals
    return ratio_z(
        -t["log_ratio"], t["valid_tokens"], t["log_ratio_sq"], -t["log_ratio_by_n"], t["valid_sq"]
    )


def weight_z(o: Observations) -> float:
    """z-score of mean ρ − 1 = Σ(w − 1) / V, clustered by sequence."""
    t = o.totals
    valid = t["valid_tokens"]
    return ratio_z(
        t["token_weight"] - valid,
        valid,
        t["token_weight_row_sq"] - 2.0 * t["token_weight_by_n"] + t["valid_sq"],
        t["token_weight_by_n"] - t["valid_sq"],
        t["valid_sq"],
    )


def swapped_columns(o: Observations) -> Detection | None:
    z_kl, z_weight = kl_z(o), weight_z(o)
    kl = o.metric(KL.name)
    if kl is None or not (
        z_kl < -DETECTOR_LIMITS["z_kl"] or (z_kl < 0 and z_weight > DETECTOR_LIMITS["z"])
    ):
        return None
    mean_weight = o.totals["token_weight"] / o.totals["valid_tokens"]
    return Detection(
        "act",
        f"kl = {fmt(kl)} is negative (z = {fmt(z_kl, 3)}) and the mean token weight "
        f"π_train/π_rollout is {fmt(mean_weight)} (z = {fmt(z_weight, 3)}): for tokens sampled "
        "from the rollout policy kl ≥ 0 and the mean weight is 1",
        {"kl": kl, "z_kl": z_kl, "mean_weight": mean_weight, "z_weight": z_weight},
        "The rollout and training columns look swapped, or the tokens were not sampled from the "
        "rollout policy whose log-probs were dumped. Check which tensor goes to rollout_log_probs "
        "(the engine's) and which to old_log_probs (the trainer's recomputation).",
    )


def processed_logprobs(o: Observations) -> Detection | None:
    t = o.totals
    valid = t["valid_tokens"]
    mean_rho = t["token_weight"] / valid
    z = weight_z(o)
    excess = (t["weight_abs_dev"] + t["token_weight"] - valid) / 2.0
    shortfall = (t["weight_abs_dev"] - t["token_weight"] + valid) / 2.0
    balance = excess / shortfall if shortfall > 0 else math.inf
    if not (
        mean_rho < 1.0 - DETECTOR_LIMITS["processed_shortfall"]
        and z < -DETECTOR_LIMITS["z"]
        and balance < DETECTOR_LIMITS["processed_balance"]
    ):
        return None
    return Detection(
        "act",
        f"the mean token weight π_train/π_rollout is {fmt(mean_rho)} (z = {fmt(z, 3)}), and weights "
        f"above 1 make up only {fmt(balance, 2)} of the shortfall below 1: the engine reported "
        "log-probs of a truncated, renormalised distribution (top-p/top-k/min-p), which are too high",
        {"mean_weight": mean_rho, "z": z, "balance": balance},
        "Make the engine return log-probs of the full distribution: in vLLM, logprobs_mode="
        "'raw_logprobs' (or 'raw_logits'-derived), not 'processed_logprobs'; in SGLang, log-probs "
        "before top-p/top-k. Importance sampling cannot undo the truncation.",
    )


def temperature_mismatch(o: Observations) -> Detection | None:
    fit = fit_slope(dict(o.totals))
    if fit is None:
        return None
    slope, correlation = fit
    deviation = slope - 1.0
    if (
        abs(deviation) < DETECTOR_LIMITS["temperature_slope"]
        or correlation < DETECTOR_LIMITS["temperature_correlation"]
    ):
        return None
    per_step = [fit_slope(dict(s)) for s in o.step_evidence]
    fitted = [f[0] - 1.0 for f in per_step if f is not None]
    agreeing = sum(1 for d in fitted if d * deviation > 0 and abs(d) >= abs(deviation) / 2)
    share = agreeing / len(fitted) if fitted else 1.0
    if share < DETECTOR_LIMITS["temperature_steps"]:
        return None
    return Detection(
        "act",
        f"log π_train ≈ {fmt(slope, 3)} × log π_rollout (correlation {fmt(correlation, 3)}, "
        f"{pct(share)} of steps agree): one side divided its logits by a temperature "
        f"≈ {fmt(1 / slope, 3)} × the other's",
        {"slope": slope, "correlation": correlation, "steps_agreeing": share},
        "Apply the sampling temperature in the trainer's log-prob computation too (verl divides "
        "the logits by rollout.temperature before log_softmax; a custom trainer must do the "
        "same), or dump the engine's log-probs at temperature 1. Correcting with IS would train "
        "toward the wrong distribution.",
    )


def padding_in_mask(o: Observations) -> Detection | None:
    t = o.totals
    rows, padded, tokens = t["rows"], t["pad_rows"], t["pad_tokens"]
    if rows == 0 or tokens < DETECTOR_LIMITS["min_pad_tokens"]:
        return None
    share = padded / rows
    if share < DETECTOR_LIMITS["pad_row_share"]:
        return None
    gap = t["pad_abs"] / tokens
    valid = t["valid_tokens"]
    lead = t["lead_tokens"]
    where = (
        "end in"
        if lead == 0
        else "start with"
        if lead == tokens
        else f"start with or end in ({pct(lead / tokens)} of them at the start)"
    )
    return Detection(
        "act",
        f"{pct(share)} of the responses {where} positions where one column repeats one value "
        f"while the other does not ({fmt(tokens / padded, 3)} positions on average, "
        f"{pct(tokens / valid)} of the valid tokens; mean |Δ log p| {fmt(gap)} there): positions "
        "that were never generated are counted in the mask",
        {
            "padded_rows": padded,
            "padded_tokens": tokens,
            "leading_tokens": lead,
            "row_share": share,
            "mean_gap": gap,
        },
        "Mark only generated tokens in response_mask: 0 after each response's last generated "
        "token (padding, and what follows the end-of-sequence token) and 0 before its first (the "
        "prompt, which the engine did not score), then dump again: every metric of this dump "
        "includes those positions.",
    )


def _position_means(o: Observations) -> tuple[float, float, float, float] | None:
    """Mean |ℓ| at positions 0–3, 4–15 and 16 on, and the tokens at 0–3 (None without all)."""
    early, middle, late = (o.position_mean(e) for e in ((0, 1, 2), (4, 8), (16, 32, 64)))
    if early is None or middle is None or late is None:
        return None
    return early[0], middle[0], late[0], early[1]


def context_mismatch(o: Observations) -> Detection | None:
    means = _position_means(o)
    if means is None:
        return None
    early, middle, late, tokens = means
    if tokens < DETECTOR_LIMITS["min_context_tokens"] or early < DETECTOR_LIMITS["context_gap"]:
        return None
    if early < DETECTOR_LIMITS["context_ratio"] * late or not early > middle > late:
        return None
    return Detection(
        "act",
        f"the two sides disagree most on the first tokens of each response and less and less "
        f"after: mean |Δ log p| = {fmt(early)} at positions 0–3, {fmt(middle)} at 4–15 and "
        f"{fmt(late)} from 16 on (×{fmt(early / late, 2)}): the trainer scored the responses "
        "after a different context than the engine generated them from",
        {"early": early, "middle": middle, "late": late, "early_tokens": tokens},
        "Score each response after exactly the prompt the engine saw: the same chat template, "
        "system prompt and turns (in multi-turn rollouts, the same earlier turns and tool "
        "outputs), and the same tokenization at the prompt/response boundary. Importance "
        "sampling would only hide the mismatch.",
    )


DUMP_BUG_CAUSES: tuple[CauseRecord, ...] = (
    CauseRecord(
        "logits_not_logprobs",
        "dump_bug",
        "Logits dumped instead of log-probs",
        logits_not_logprobs,
        ("positive_share",),
        DUMP_BUGS_DOCS,
    ),
    CauseRecord(
        "identical_columns",
        "dump_bug",
        "The two log-prob columns are identical",
        identical_columns,
        (),
        DUMP_BUGS_DOCS,
    ),
    CauseRecord(
        "constant_column",
        "dump_bug",
        "A log-prob column holds a placeholder",
        constant_column,
        ("min_pairs",),
        DUMP_BUGS_DOCS,
    ),
    CauseRecord(
        "misaligned_tokens",
        "dump_bug",
        "The two columns score different tokens",
        misaligned_tokens,
        ("misaligned_gap_ratio", "min_pairs"),
        DUMP_BUGS_DOCS,
    ),
    CauseRecord(
        "unpaired_rows",
        "dump_bug",
        "The two columns of a row belong to different responses",
        unpaired_rows,
        ("unpaired_share", "unpaired_balance", "min_pairing_rows"),
        DUMP_BUGS_DOCS,
    ),
    CauseRecord(
        "padding_in_mask",
        "dump_bug",
        "The mask counts positions that were not generated",
        padding_in_mask,
        ("pad_row_share", "min_pad_tokens"),
        DUMP_BUGS_DOCS,
    ),
    CauseRecord(
        "context_mismatch",
        "dump_bug",
        "The two sides scored different contexts",
        context_mismatch,
        ("context_ratio", "context_gap", "min_context_tokens"),
        DUMP_BUGS_DOCS,
    ),
    CauseRecord(
        "swapped_columns",
        "dump_bug",
        "The rollout and training columns are swapped",
        swapped_columns,
        ("z", "z_kl"),
        DUMP_BUGS_DOCS,
    ),
    CauseRecord(
        "processed_logprobs",
        "dump_bug",
        "The engine reported log-probs after top-p/top-k",
        processed_logprobs,
        ("processed_shortfall", "processed_balance", "z"),
        DUMP_BUGS_DOCS,
    ),
    CauseRecord(
        "temperature_mismatch",
        "dump_bug",
        "The two sides use different temperatures",
        temperature_mismatch,
        ("temperature_slope", "temperature_correlation", "temperature_steps"),
        DUMP_BUGS_DOCS,
    ),
)
"""Dump bugs, in the order they are tested (the first that fires is the only cause)."""
