"""Root-cause diagnosis: a bug in how the dump was made, or a real mismatch, and what to do.

A pure function of :class:`Observations` (:func:`diagnose`). Each detector of :data:`DETECTORS` tests
one statistic against limits written once in :data:`LIMITS`; docs/diagnosis.md states every statistic,
its false-positive control and the detection rates measured on planted bugs.

**Dump bugs** (the fix is in the pipeline that made the dump; no IS/RS configuration is ever
recommended for them), tested in this order, the first that fires explaining the dump:
``logits_not_logprobs``, ``identical_columns``, ``misaligned_tokens``, ``swapped_columns``,
``processed_logprobs``, ``temperature_mismatch``.

**Real mismatch** (correction applies), tested when no dump bug fired: ``stale_policy``,
``growing_drift``, ``catastrophic_tokens``, ``heavy_tail``, ``long_sequence_compounding`` and
``numeric_mismatch``. Their severities come from the metric registry's bands
(:mod:`rcdiag.assess.registry`), so a cause is never more or less alarming than its numbers.

Two identities drive the dump-bug tests. With tokens sampled from the rollout distribution q and
π the trainer's, E_q[ℓ] = −KL(q‖π) ≤ 0, so ``kl`` = −mean ℓ ≥ 0 up to noise (swapped columns make it
negative); and E_q[ρ] = Σ_{x: q(x)>0} π(x) = 1 when q has full support, so the mean token weight
stays at 1, its excess above 1 balancing its shortfall below 1. An engine that reports the log-probs
of a truncated, renormalised distribution (top-p, top-k, min-p) makes every ρ = Z ≤ 1, the nucleus
mass: the mean falls below 1 and the upper side vanishes.
"""

from __future__ import annotations

import math
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any, Literal

from rcdiag.assess.registry import REGISTRY, Status, worst
from rcdiag.checks.trend import Trend
from rcdiag.formatting import fmt, pct
from rcdiag.metrics.evidence import SHIFTS, fit_slope, mean_gap

Kind = Literal["dump_bug", "mismatch"]

LIMITS: dict[str, float] = {
    "positive_share": 0.01,
    "z": 4.0,
    "z_kl": 3.0,
    "processed_shortfall": 0.01,
    "processed_balance": 0.5,
    "temperature_slope": 0.1,
    "temperature_correlation": 0.9,
    "temperature_steps": 0.8,
    "misaligned_gap_ratio": 0.5,
    "min_pairs": 100,
    "stale_ratio": 2.0,
    "min_lag_tokens": 100,
    "tail_ratio": 3.0,
    "tail_size": 1.0,
    "drift_rise": 0.5,
}
"""Every limit of the detectors (docs/diagnosis.md explains each).

* ``positive_share``: share of valid tokens holding a log-prob > 0.01 that makes a column logits.
* ``z``, ``z_kl``: one-sided z-scores (sequence-clustered standard errors) of mean ρ − 1 (either
  side) and of kl < 0.
* ``processed_shortfall``, ``processed_balance``: mean ρ at least 1% below 1, and the excess of ρ
  above 1 less than half its shortfall below 1.
* ``temperature_*``: |slope − 1| of log π_train on log π_rollout, the fit's correlation, and the
  share of steps whose own slope deviates the same way by at least half as much.
* ``misaligned_gap_ratio``: the columns' mean |Δ log p| at the same position reaching this share of
  the smallest one against a neighbouring position (aligned columns sit far below: one token's
  two log-probs differ far less than two tokens' do); a shift whose gap is below this share of the
  aligned one names the offset. ``min_pairs`` sampled pairs needed.
* ``stale_ratio``: k3_kl of lagged rows over that of lag-0 rows; ``min_lag_tokens`` per lag.
* ``tail_ratio``, ``tail_size``: (p99.9 − p0.1) / (p99 − p1) of ℓ (1.33 for a normal law) and the
  size of the outer quantiles that makes a tail matter.
* ``drift_rise``: a significant sustained rise of k3_kl by more than 50%.
"""


@dataclass(frozen=True)
class Cause:
    """One diagnosed cause: what it is, how bad, the numbers behind it, and what to do."""

    id: str
    kind: Kind
    severity: Status
    summary: str
    evidence: dict[str, Any]
    advice: str

    def to_json(self) -> dict[str, Any]:
        return {
            "id": self.id,
            "kind": self.kind,
            "severity": self.severity,
            "summary": self.summary,
            "evidence": self.evidence,
            "advice": self.advice,
        }


@dataclass(frozen=True)
class Observations:
    """What the detectors read, all from the one pass over the dump.

    Attributes:
        overall: the overall metrics (``rollout_corr/…``, ``rcdiag/…``).
        totals: the summed row and evidence statistics of the whole dump.
        step_evidence: per step (in step order), the summed evidence statistics.
        k3_trend: the change-point test on per-step k3_kl (:func:`rcdiag.checks.trend.detect_trend`).
        recent_k3_kl: median k3_kl over the last quarter of the steps (None with one step).
        lags: the mismatch per policy lag, when the dump records it.
        positive_log_probs: valid positions where a column holds a log-prob > 0.01.
    """

    overall: Mapping[str, float | None]
    totals: Mapping[str, float]
    step_evidence: Sequence[Mapping[str, float]] = ()
    k3_trend: Trend | None = None
    recent_k3_kl: float | None = None
    lags: Sequence[Mapping[str, Any]] | None = None
    positive_log_probs: int = 0

    def metric(self, name: str) -> float | None:
        value = self.overall.get(name)
        return None if value is None or math.isnan(value) else float(value)


@dataclass(frozen=True)
class Diagnosis:
    """The verdict-bearing part of every result document."""

    verdict: Status
    causes: tuple[Cause, ...] = field(default_factory=tuple)

    @property
    def dump_bug(self) -> Cause | None:
        """The dump bug found, if any (the numbers then describe the bug, not the training)."""
        return next((c for c in self.causes if c.kind == "dump_bug"), None)

    def to_json(self) -> dict[str, Any]:
        return {"verdict": self.verdict, "causes": [c.to_json() for c in self.causes]}


def _status(metric: str, value: float | None) -> Status | None:
    return REGISTRY[metric].status(value)


def _ratio_z(total: float, count: float, sq: float, cross: float, count_sq: float) -> float:
    """z-score of a ratio estimate r = total / count against 0 clustered by sequence.

    With per-sequence sums T_i and counts n_i, Var(r) ≈ Σ(T_i − r·n_i)² / (Σn_i)²
    = (ΣT_i² − 2rΣT_i·n_i + r²Σn_i²) / (Σn_i)².
    """
    r = total / count
    variance = max(0.0, sq - 2.0 * r * cross + r * r * count_sq) / (count * count)
    if variance == 0.0:
        return math.copysign(math.inf, r) if r else 0.0
    return r / math.sqrt(variance)


# ----------------------------------------------------------------------------------------------
# Dump bugs


def _logits(o: Observations) -> Cause | None:
    valid = o.totals["valid_tokens"]
    share = o.positive_log_probs / valid if valid else 0.0
    if share < LIMITS["positive_share"]:
        return None
    return Cause(
        "logits_not_logprobs",
        "dump_bug",
        "act",
        f"{pct(share)} of valid tokens hold a positive value: a column holds logits or scores, "
        "not log-probabilities (which are ≤ 0)",
        {"positive_share": share, "positive_tokens": o.positive_log_probs},
        "Dump log_softmax(logits) gathered at the sampled token ids for both columns (or name the "
        "right columns with --rollout-col / --training-col).",
    )


def _identical(o: Observations) -> Cause | None:
    if o.metric("rcdiag/abs_log_ratio_max") != 0.0:
        return None
    return Cause(
        "identical_columns",
        "dump_bug",
        "watch",
        "the two columns are identical at every valid token: there is no mismatch to measure",
        {"valid_tokens": o.totals["valid_tokens"]},
        "Either the trainer never recomputed the log-probs (verl's bypass mode reuses the rollout's "
        "as old_log_probs) or one tensor was written twice. Dump the trainer's own forward pass "
        "(old_log_probs) beside the engine's rollout_log_probs to measure the mismatch.",
    )


def _misaligned(o: Observations) -> Cause | None:
    gaps = {s: mean_gap(dict(o.totals), s) for s in SHIFTS}
    aligned = gaps[0]
    enough = all(o.totals[f"shift_{s}_pairs"] >= LIMITS["min_pairs"] for s in SHIFTS)
    if aligned is None or not enough:
        return None
    best = min((s for s in SHIFTS if s != 0), key=lambda s: gaps[s] or math.inf)
    neighbour = gaps[best] or math.inf
    ratio = aligned / neighbour
    if ratio < LIMITS["misaligned_gap_ratio"]:
        return None
    if neighbour < LIMITS["misaligned_gap_ratio"] * aligned:
        direction = "later" if best > 0 else "earlier"
        finding = (
            f"the training log-probs match the rollout's {abs(best)} position(s) {direction}: "
            f"mean |Δ log p| is {fmt(aligned)} as dumped but {fmt(neighbour)} when shifted by {best}"
        )
    else:
        finding = (
            f"the two columns are no closer at the same position than at neighbouring ones: mean "
            f"|Δ log p| is {fmt(aligned)} as dumped and {fmt(neighbour)} against the next token, "
            "so they do not score the same tokens"
        )
    return Cause(
        "misaligned_tokens",
        "dump_bug",
        "act",
        finding,
        {
            "alignment_ratio": ratio,
            "best_shift": best if neighbour < LIMITS["misaligned_gap_ratio"] * aligned else 0,
            **{f"mean_gap_shift_{s}": gaps[s] for s in SHIFTS},
        },
        "Align the trainer's log-probs with the response tokens: the log-prob of token t comes "
        "from the logits at position t − 1 (logits[:, prompt_len − 1 : −1] scored against "
        "input_ids[:, prompt_len:]), and the response mask starts at the first response token. "
        "No importance-sampling setting can repair misaligned log-probs.",
    )


def _kl_z(o: Observations) -> float:
    """z-score of kl = −Σℓ / V, clustered by sequence."""
    t = o.totals
    return _ratio_z(
        -t["log_ratio"], t["valid_tokens"], t["log_ratio_sq"], -t["log_ratio_by_n"], t["valid_sq"]
    )


def _weight_z(o: Observations) -> float:
    """z-score of mean ρ − 1 = Σ(w − 1) / V, clustered by sequence."""
    t = o.totals
    valid = t["valid_tokens"]
    return _ratio_z(
        t["token_weight"] - valid,
        valid,
        t["token_weight_row_sq"] - 2.0 * t["token_weight_by_n"] + t["valid_sq"],
        t["token_weight_by_n"] - t["valid_sq"],
        t["valid_sq"],
    )


def _swapped(o: Observations) -> Cause | None:
    z_kl, z_weight = _kl_z(o), _weight_z(o)
    kl = o.metric("rollout_corr/kl")
    if kl is None or not (z_kl < -LIMITS["z_kl"] or (z_kl < 0 and z_weight > LIMITS["z"])):
        return None
    mean_weight = o.totals["token_weight"] / o.totals["valid_tokens"]
    return Cause(
        "swapped_columns",
        "dump_bug",
        "act",
        f"kl = {fmt(kl)} is negative (z = {fmt(z_kl, 3)}) and the mean token weight "
        f"π_train/π_rollout is {fmt(mean_weight)} (z = {fmt(z_weight, 3)}): for tokens sampled "
        "from the rollout policy kl ≥ 0 and the mean weight is 1",
        {"kl": kl, "z_kl": z_kl, "mean_weight": mean_weight, "z_weight": z_weight},
        "The rollout and training columns look swapped, or the tokens were not sampled from the "
        "rollout policy whose log-probs were dumped. Check which tensor goes to rollout_log_probs "
        "(the engine's) and which to old_log_probs (the trainer's recomputation).",
    )


def _processed(o: Observations) -> Cause | None:
    t = o.totals
    valid = t["valid_tokens"]
    mean_rho = t["token_weight"] / valid
    z = _weight_z(o)
    excess = (t["weight_abs_dev"] + t["token_weight"] - valid) / 2.0
    shortfall = (t["weight_abs_dev"] - t["token_weight"] + valid) / 2.0
    balance = excess / shortfall if shortfall > 0 else math.inf
    if not (
        mean_rho < 1.0 - LIMITS["processed_shortfall"]
        and z < -LIMITS["z"]
        and balance < LIMITS["processed_balance"]
    ):
        return None
    return Cause(
        "processed_logprobs",
        "dump_bug",
        "act",
        f"the mean token weight π_train/π_rollout is {fmt(mean_rho)} (z = {fmt(z, 3)}), and weights "
        f"above 1 make up only {fmt(balance, 2)} of the shortfall below 1: the engine reported "
        "log-probs of a truncated, renormalised distribution (top-p/top-k/min-p), which are too high",
        {"mean_weight": mean_rho, "z": z, "balance": balance},
        "Make the engine return log-probs of the full distribution: in vLLM, logprobs_mode="
        "'raw_logprobs' (or 'raw_logits'-derived), not 'processed_logprobs'; in SGLang, log-probs "
        "before top-p/top-k. Importance sampling cannot undo the truncation.",
    )


def _temperature(o: Observations) -> Cause | None:
    fit = fit_slope(dict(o.totals))
    if fit is None:
        return None
    slope, correlation = fit
    deviation = slope - 1.0
    if (
        abs(deviation) < LIMITS["temperature_slope"]
        or correlation < LIMITS["temperature_correlation"]
    ):
        return None
    per_step = [fit_slope(dict(s)) for s in o.step_evidence]
    fitted = [f[0] - 1.0 for f in per_step if f is not None]
    agreeing = sum(1 for d in fitted if d * deviation > 0 and abs(d) >= abs(deviation) / 2)
    share = agreeing / len(fitted) if fitted else 1.0
    if share < LIMITS["temperature_steps"]:
        return None
    return Cause(
        "temperature_mismatch",
        "dump_bug",
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


# ----------------------------------------------------------------------------------------------
# Real mismatch


def _stale(o: Observations) -> Cause | None:
    if not o.lags:
        return None
    usable = [g for g in o.lags if g["valid_tokens"] >= LIMITS["min_lag_tokens"]]
    fresh = next((g for g in usable if g["lag"] == 0), None)
    stale = [g for g in usable if g["lag"] > 0]
    if fresh is None or not stale:
        return None
    worst_lag = max(stale, key=lambda g: g["lag"])
    ratio = (worst_lag["k3_kl"] or 0.0) / max(fresh["k3_kl"] or 0.0, 1e-12)
    severity = _status("rollout_corr/k3_kl", worst_lag["k3_kl"])
    if ratio < LIMITS["stale_ratio"] or severity in (None, "healthy"):
        return None
    return Cause(
        "stale_policy",
        "mismatch",
        severity,
        f"the mismatch grows with the policy lag: k3_kl = {fmt(fresh['k3_kl'])} at lag 0, "
        f"{fmt(worst_lag['k3_kl'])} at lag {worst_lag['lag']} (×{fmt(ratio, 2)}): staleness, "
        "not numerics",
        {"by_lag": [dict(g) for g in o.lags], "ratio": ratio},
        "Bound the staleness (fewer optimizer steps between weight syncs) and correct what "
        "remains with a decoupled preset (token-level truncated IS, e.g. decoupled_token_is), "
        "which uses the rollout policy's log-probs as the behaviour policy.",
    )


def _drift(o: Observations) -> Cause | None:
    trend = o.k3_trend
    if trend is None or not trend.significant or trend.relative_change <= LIMITS["drift_rise"]:
        return None
    recent = trend.after if o.recent_k3_kl is None else max(o.recent_k3_kl, trend.after or 0.0)
    level = _status("rollout_corr/k3_kl", recent) or "healthy"
    severity: Status = "act" if level != "healthy" else "watch"
    return Cause(
        "growing_drift",
        "mismatch",
        severity,
        f"k3_kl rises from {fmt(trend.before)} to {fmt(trend.after)} from step "
        f"{trend.change_step} on (p = {fmt(trend.p_value, 2)})",
        {
            "change_step": trend.change_step,
            "before": trend.before,
            "after": trend.after,
            "p_value": trend.p_value,
            "relative_change": trend.relative_change,
        },
        "Something changes during the run: look at what happened at that step (weight sync, "
        "learning-rate schedule, a new data mix, an engine restart). Meanwhile add a geometric-"
        "mean rejection criterion (seq_mean_k1) as a safety valve on top of token-level TIS.",
    )


def _catastrophic(o: Observations) -> Cause | None:
    share = o.metric("rcdiag/catastrophic_token_fraction")
    level = _status("rcdiag/catastrophic_token_fraction", share)
    if level in (None, "healthy"):
        return None
    vetoed = o.metric("rcdiag/veto_fraction")
    severity = worst([level, _status("rcdiag/veto_fraction", vetoed)])
    return Cause(
        "catastrophic_tokens",
        "mismatch",
        severity,
        f"{pct(share)} of tokens have π_train/π_rollout below the veto threshold, in "
        f"{pct(vetoed)} of sequences",
        {"catastrophic_token_fraction": share, "veto_fraction": vetoed},
        "Reject sequences holding such a token: a max criterion (seq_max_k2) in the latest verl, "
        "the token veto in the legacy one.",
    )


def _heavy_tail(o: Observations) -> Cause | None:
    q = {p: o.metric(f"rcdiag/log_ratio_{p}") for p in ("p0.1", "p1", "p99", "p99.9")}
    if any(v is None for v in q.values()):
        return None
    inner = (q["p99"] or 0.0) - (q["p1"] or 0.0)
    outer = (q["p99.9"] or 0.0) - (q["p0.1"] or 0.0)
    size = max(abs(q["p0.1"] or 0.0), abs(q["p99.9"] or 0.0))
    if inner <= 0 or outer / inner < LIMITS["tail_ratio"] or size < LIMITS["tail_size"]:
        return None
    return Cause(
        "heavy_tail",
        "mismatch",
        "watch",
        f"the log-ratio has heavy tails: p0.1…p99.9 spans {fmt(outer, 3)}, {fmt(outer / inner, 3)}× "
        f"the p1…p99 span (1.3× for a normal law)",
        {**{f"log_ratio_{k}": v for k, v in q.items()}, "tail_ratio": outer / inner},
        "A few tokens carry most of the weight variance: truncate the weights (token-level TIS) "
        "and consider a max criterion for the extreme tokens.",
    )


def _long_sequences(o: Observations) -> Cause | None:
    chi2, ess = o.metric("rollout_corr/chi2_seq"), o.metric("rcdiag/ess_seq")
    level = worst([_status("rollout_corr/chi2_seq", chi2), _status("rcdiag/ess_seq", ess)])
    if level == "healthy":
        return None
    length = o.metric("rcdiag/response_length_mean")
    return Cause(
        "long_sequence_compounding",
        "mismatch",
        level,
        f"per-token mismatch compounds over ~{fmt(length, 3)} tokens per response: χ²_seq = "
        f"{fmt(chi2)}, ESS_seq = {fmt(ess)}",
        {"chi2_seq": chi2, "ess_seq": ess, "response_length_mean": length},
        "Sequence-level importance weights are unreliable at this length: prefer token-level "
        "truncated IS, and geometric-mean (seq_mean) rather than sequence-sum criteria.",
    )


def _numeric(o: Observations) -> Cause | None:
    k3, gap = o.metric("rollout_corr/k3_kl"), o.metric("rcdiag/abs_log_ratio_mean")
    fresh = next((g for g in o.lags or () if g["lag"] == 0), None)
    if fresh is not None:  # staleness is told apart: numerics are what the lag-0 rows show
        k3, gap = fresh["k3_kl"], fresh["abs_log_ratio_mean"]
    level = worst([_status("rollout_corr/k3_kl", k3), _status("rcdiag/abs_log_ratio_mean", gap)])
    if level == "healthy":
        return None
    return Cause(
        "numeric_mismatch",
        "mismatch",
        level,
        f"the engine and the trainer compute different probabilities for the same tokens: "
        f"k3_kl = {fmt(k3)}, mean |Δ log p| = {fmt(gap)}",
        {"k3_kl": k3, "abs_log_ratio_mean": gap},
        "Correct it with token-level truncated importance sampling (a decoupled token-IS preset); "
        "at the source, match precisions (fp32 lm_head / logits in the engine) where possible.",
    )


Detector = Callable[[Observations], "Cause | None"]

DUMP_BUG_DETECTORS: tuple[Detector, ...] = (
    _logits,
    _identical,
    _misaligned,
    _swapped,
    _processed,
    _temperature,
)
MISMATCH_DETECTORS: tuple[Detector, ...] = (
    _stale,
    _drift,
    _catastrophic,
    _heavy_tail,
    _long_sequences,
    _numeric,
)
DETECTORS: tuple[Detector, ...] = DUMP_BUG_DETECTORS + MISMATCH_DETECTORS


def diagnose(observations: Observations, metric_statuses: Sequence[Status] = ()) -> Diagnosis:
    """Causes and the verdict: the worst of the metric statuses and the causes' severities.

    A dump bug, when found, is the only cause: its numbers describe the bug, not the training.
    """
    for detect in DUMP_BUG_DETECTORS:
        cause = detect(observations)
        if cause is not None:
            return Diagnosis(verdict=cause.severity, causes=(cause,))
    causes = tuple(c for detect in MISMATCH_DETECTORS if (c := detect(observations)) is not None)
    return Diagnosis(
        verdict=worst([*metric_statuses, *(c.severity for c in causes)]), causes=causes
    )
