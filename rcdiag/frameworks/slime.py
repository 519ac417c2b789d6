"""THUDM slime: ``train_rollout_logprob_abs_diff``, the built-in TIS and IcePop, and the MIS helper.

Read from THUDM/slime ``slime/backends/megatron_utils/loss.py`` (commit 00c2d6d: the metric,
``vanilla_tis_function``, ``icepop_function``), ``slime/backends/megatron_utils/cp_utils.py``
(``get_sum_of_sample_mean``: a mean per sample, summed, divided by the step's sample count) and
``examples/train_infer_mismatch_helper/mis.py`` / ``mis.yaml`` (commit cfab168; the veto from the
version before it). docs/frameworks.md, "slime".
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass, field
from typing import Any, ClassVar, Literal

import numpy as np

from rcdiag.correction.engine import Component, Getter, Metrics, RowStats, TokenView
from rcdiag.correction.external import (
    Band,
    Level,
    ModePlan,
    Ratio,
    Rule,
    TrustRegion,
    Veto,
    Weights,
    ratio_tokens,
)
from rcdiag.frameworks.base import Framework, Preset, Source, abs_log_ratio, prefixed, rho
from rcdiag.metrics.grouped import Kind
from rcdiag.metrics.ragged import F64

ID = "slime"
CI_GATE = 0.1
"""slime's CI asserts ``train/train_rollout_logprob_abs_diff`` ≤ 0.1 (``--ci-test``)."""
SAFETY_BOUND = 20.0
"""mis.py clamps every log ratio to ±20 before exponentiating it."""

SOURCES = (
    Source(
        "THUDM/slime",
        "slime/backends/megatron_utils/loss.py",
        "00c2d6db0f23a4900be6e80a8eb81eebf9e1ebff",
        "train_rollout_logprob_abs_diff; vanilla_tis_function; icepop_function",
    ),
    Source(
        "THUDM/slime",
        "slime/backends/megatron_utils/cp_utils.py",
        None,
        "get_sum_of_sample_mean: per-sample masked mean (divisor max(n, 1)), summed",
    ),
    Source(
        "THUDM/slime",
        "examples/train_infer_mismatch_helper/mis.py",
        "cfab168702b8ed7fd5e15e5edca7520a5f5a920c",
        "compute_mis_weights: tis_level/tis_mode/bounds, use_rs, trust region, batch normalisation",
    ),
    Source(
        "THUDM/slime",
        "examples/train_infer_mismatch_helper/mis.yaml",
        "cfab168702b8ed7fd5e15e5edca7520a5f5a920c",
        "the helper's example configuration (the MIS preset's defaults)",
    ),
)

PPL_METRICS = (
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
)


@dataclass(frozen=True)
class SlimeLogged(Component):
    """``train_rollout_logprob_abs_diff`` (always) and the MIS helper's perplexity metrics.

    slime reduces every metric by a mean per sample over its valid tokens (0 for a sample without
    one), summed over the samples and divided by the step's sample count B.
    """

    kinds: ClassVar[dict[str, Kind]] = {
        "abs_row_mean": "sum",
        "k3_row_mean": "sum",
        "chi2_row": "sum",
    }

    def row_stats(self, view: TokenView) -> RowStats:
        ell = view.log_ratio
        w = ratio_tokens(view, Ratio("token", SAFETY_BOUND))
        second = view.row_mean(view.squares(w))
        return {
            "abs_row_mean": view.row_mean(abs_log_ratio(view)),
            "k3_row_mean": view.row_mean(np.expm1(ell) - ell),
            "chi2_row": np.where(view.nonempty, second - 1.0, 0.0),
        }

    def metrics(self, get: Getter) -> Metrics:
        rows = get("rows")
        empty = rows - get("nonempty_rows")  # an empty sample adds 0, where verl's mean adds e^0
        return prefixed(
            ID,
            {
                "train_rollout_logprob_abs_diff": get("abs_row_mean") / rows,
                "mis_training_log_ppl": get("training_log_ppl") / rows,
                "mis_training_ppl": (get("training_ppl") - empty) / rows,
                "mis_rollout_log_ppl": get("rollout_log_ppl") / rows,
                "mis_rollout_ppl": (get("rollout_ppl") - empty) / rows,
                "mis_kl": get("log_ppl_diff")
                / rows,  # the sample mean of log π_rollout − log π_train
                "mis_k3_kl": get("k3_row_mean") / rows,
                "mis_log_ppl_diff": get("log_ppl_diff") / rows,
                "mis_log_ppl_abs_diff": get("log_ppl_abs_diff") / rows,
                "mis_ppl_ratio": (get("ppl_ratio") - empty) / rows,
                "mis_chi2_token": get("chi2_row") / rows,
                "mis_chi2_seq": get("chi2_seq") / rows,  # e^0 − 1 = 0 for an empty sample
            },
        )


def _sample_means(view: TokenView, values: Mapping[str, F64]) -> RowStats:
    """Each token array's per-sample mean (values must be 0 where invalid)."""
    return {name: view.row_mean(v) for name, v in values.items()}


def _flag(view: TokenView, flags: np.ndarray) -> F64:
    return (flags & view.mask).astype(np.float64)


@dataclass(frozen=True)
class SlimeTisLogged(Component):
    """``tis``, ``tis_clipfrac``, ``tis_abs`` of the built-in TIS or of ``icepop_function``: per
    sample the mean of ρ (unclamped), of [W ≠ ρ] and of |ρ − 1|, then the mean over samples."""

    weights: Weights
    names: ClassVar[tuple[str, ...]] = ("tis", "tis_clipfrac", "tis_abs")
    kinds: ClassVar[dict[str, Kind]] = dict.fromkeys(names, "sum")

    def row_stats(self, view: TokenView) -> RowStats:
        ratio, applied = rho(view), self.weights.applied(view)
        deviation = view.valid(np.abs(ratio - 1.0))
        return _sample_means(
            view,
            {"tis": ratio, "tis_clipfrac": _flag(view, applied != ratio), "tis_abs": deviation},
        )

    def metrics(self, get: Getter) -> Metrics:
        rows = get("rows")
        return prefixed(ID, {name: get(name) / rows for name in self.names})


Mode = Literal["truncate", "clip", "mask"]


@dataclass(frozen=True)
class Mis:
    """The MIS helper's options (mis.py; names as in its YAML)."""

    tis_level: Level = "token"
    tis_mode: Mode = "truncate"
    tis_lower_bound: float | None = 0.5
    tis_upper_bound: float = 2.0
    use_rs: bool = True
    rs_level: Level = "token"
    rs_lower_bound: float | None = None
    rs_upper_bound: float | None = None
    rs_trust_region: Literal["max", "avg"] | None = None
    rs_tr_threshold: float = 0.5
    rs_veto_threshold: float | None = None
    tis_batch_normalize: bool = True

    @property
    def lower(self) -> float:
        return 1.0 / self.tis_upper_bound if self.tis_lower_bound is None else self.tis_lower_bound

    @property
    def rs_bounds(self) -> tuple[float, float]:
        lo = self.lower if self.rs_lower_bound is None else self.rs_lower_bound
        hi = self.tis_upper_bound if self.rs_upper_bound is None else self.rs_upper_bound
        return lo, hi

    def config(self) -> dict[str, Any]:
        """The YAML keys (those without effect left out: RS keys without use_rs, the trust-region
        threshold without a trust region)."""
        out = {"use_tis": True, **{k: getattr(self, k) for k in self.__dataclass_fields__}}
        if not self.use_rs:
            out = {k: v for k, v in out.items() if not k.startswith("rs_")}
        elif self.rs_trust_region is None:
            del out["rs_tr_threshold"]
        return out


def mis_plan(options: Mis) -> SlimeMisPlan:
    """What compute_mis_weights does: weights at tis_level (log ratio clamped to ±20) bounded by
    tis_mode (``mask`` keeps them and drops the tokens outside the bounds), then, with use_rs, the
    tokens (or rows) whose rs_level ratio leaves the RS bounds are dropped, and the veto / trust
    region drop whole rows; tis_batch_normalize divides by the batch mean of the weights."""
    ratio = Ratio(options.tis_level, SAFETY_BOUND)
    lo, hi = options.lower, options.tis_upper_bound
    rules: list[Rule] = []
    if options.tis_mode == "truncate":
        weights = Weights(ratio, "truncate", hi=hi)
    elif options.tis_mode == "clip":
        weights = Weights(ratio, "clip", lo=lo, hi=hi)
    else:
        weights = Weights(ratio)
        rules.append(Band(ratio, lo, hi))
    if options.use_rs:
        rs_lo, rs_hi = options.rs_bounds
        rules.append(Band(Ratio(options.rs_level, SAFETY_BOUND), rs_lo, rs_hi))
        if options.rs_trust_region is not None:
            rules.append(TrustRegion(options.rs_trust_region, options.rs_tr_threshold))
        if options.rs_veto_threshold is not None:
            rules.append(Veto(options.rs_veto_threshold))
    normalize: Literal["token", "sequence"] | None = None
    if options.tis_batch_normalize:
        assert options.tis_level != "geometric", "slime refuses batch normalisation of geometric"
        normalize = "token" if options.tis_level == "token" else "sequence"
    return SlimeMisPlan(ID, weights, tuple(rules), normalize, options=options)


@dataclass(frozen=True)
class SlimeMisLogged(Component):
    """The MIS helper's weight metrics (``mis_`` prefix; each a per-sample mean, then the mean over
    samples, over the valid tokens before rejection)."""

    plan: SlimeMisPlan

    kinds: ClassVar[dict[str, Kind]] = {
        "mis_tis_weight_before_bound": "sum",
        "mis_tis_weight_after_bound": "sum",
        "mis_tis_fraction_a": "sum",
        "mis_tis_fraction_b": "sum",
        "mis_rs_mask_fraction_low": "sum",
        "mis_rs_mask_fraction_high": "sum",
        "mis_catastrophic_token_fraction": "sum",
        "mis_catastrophic_seq_fraction": "sum",
        "final_mean": "sum",
        "final_min": "sum",
        "final_max": "sum",
        "norm_token_sum": "sum",
        "norm_row_mean": "sum",
    }

    def row_stats(self, view: TokenView) -> RowStats:
        options, weights = self.plan.options, self.plan.weights
        assert weights is not None
        before = ratio_tokens(view, weights.ratio)
        after = weights.applied(view)
        lo, hi = options.lower, options.tis_upper_bound
        if options.tis_mode == "truncate":
            a, b = _flag(view, before > hi), np.zeros_like(before)
        else:
            a, b = _flag(view, before < lo), _flag(view, before > hi)
        values = {
            "mis_tis_weight_before_bound": before,
            "mis_tis_weight_after_bound": after,
            "mis_tis_fraction_a": a,
            "mis_tis_fraction_b": b,
        }
        rs_lo, rs_hi = options.rs_bounds
        rs = ratio_tokens(view, Ratio(options.rs_level, SAFETY_BOUND))
        values["mis_rs_mask_fraction_low"] = _flag(view, rs < rs_lo)
        values["mis_rs_mask_fraction_high"] = _flag(view, rs > rs_hi)
        if options.rs_veto_threshold is not None:
            catastrophic = _flag(view, view.log_ratio < np.log(options.rs_veto_threshold))
            values["mis_catastrophic_token_fraction"] = catastrophic
            seq = view.broadcast(view.row_sum(catastrophic) > 0)
            values["mis_catastrophic_seq_fraction"] = _flag(view, seq)
        stats = _sample_means(view, values)
        stats["final_mean"] = view.row_mean(after)
        stats["final_min"] = np.where(view.nonempty, view.valid_min(after), 0.0)
        stats["final_max"] = np.where(view.nonempty, view.valid_max(after), 0.0)
        stats["norm_token_sum"] = view.row_sum(after)  # the batch-normalisation μ's sums
        stats["norm_row_mean"] = view.row_mean(after)
        for name in ("mis_catastrophic_token_fraction", "mis_catastrophic_seq_fraction"):
            stats.setdefault(name, np.zeros(view.batch.rows))
        return stats

    def metrics(self, get: Getter) -> Metrics:
        options = self.plan.options
        rows = get("rows")
        mu = self.plan.outcome().normalisation(get)
        out: Metrics = {
            "mis_tis_weight_before_bound": get("mis_tis_weight_before_bound") / rows,
            "mis_tis_weight_after_bound": get("mis_tis_weight_after_bound") / rows,
        }
        a, b = get("mis_tis_fraction_a") / rows, get("mis_tis_fraction_b") / rows
        if options.tis_mode == "truncate":
            out["mis_tis_truncate_fraction"] = a
        else:
            out[f"mis_tis_{options.tis_mode}_fraction_low"] = a
            out[f"mis_tis_{options.tis_mode}_fraction_high"] = b
        if options.use_rs:
            out["mis_rs_mask_fraction_low"] = get("mis_rs_mask_fraction_low") / rows
            out["mis_rs_mask_fraction_high"] = get("mis_rs_mask_fraction_high") / rows
            if options.rs_veto_threshold is not None:
                for name in ("mis_catastrophic_token_fraction", "mis_catastrophic_seq_fraction"):
                    out[name] = get(name) / rows
        out["mis_is_ratio_mean_after_tis_rs"] = get("mis_tis_weight_after_bound") / rows
        if options.tis_batch_normalize:
            # a constant on every token: its per-sample mean is 0 for a sample without tokens
            out["mis_batch_norm_factor"] = mu * get("nonempty_rows") / rows
        out["mis_is_ratio_mean_final"] = get("final_mean") / mu / rows
        out["mis_is_ratio_min_final"] = get("final_min") / mu / rows
        out["mis_is_ratio_max_final"] = get("final_max") / mu / rows
        return prefixed(ID, out)


@dataclass(frozen=True)
class SlimeMisPlan(ModePlan):
    options: Mis = field(default_factory=Mis)

    def components(self) -> tuple[Component, ...]:
        return (SlimeLogged(), SlimeMisLogged(self), self.outcome())


@dataclass(frozen=True)
class SlimeTisPlan(ModePlan):
    def components(self) -> tuple[Component, ...]:
        assert self.weights is not None
        return (SlimeLogged(), SlimeTisLogged(self.weights), self.outcome())


TIS_CLIP, TIS_CLIP_LOW = 2.0, 0.0
"""``--tis-clip`` and ``--tis-clip-low`` defaults."""


def tis_plan(low: float = TIS_CLIP_LOW, high: float = TIS_CLIP) -> SlimeTisPlan:
    """``--use-tis``: W = clamp(ρ, low, high), ρ unclamped."""
    return SlimeTisPlan(ID, Weights(Ratio("token"), "clip", lo=low, hi=high))


def icepop_plan(low: float = TIS_CLIP_LOW, high: float = TIS_CLIP) -> SlimeTisPlan:
    """``icepop_function``: W = ρ inside [low, high] (inclusive), else 0."""
    token = Ratio("token")
    return SlimeTisPlan(ID, Weights(token, zero=(Band(token, low, high),)))


MIS_YAML = Mis()
"""mis.yaml as shipped: token TIS truncated at 2, token RS in [0.5, 2], batch normalisation."""

MIS_VARIANTS: dict[str, tuple[str, Mis]] = {
    "mis": ("mis.yaml: token TIS ≤ 2, token RS [0.5, 2], batch-normalised", MIS_YAML),
    "mis_veto": (
        "mis.yaml plus rs_veto_threshold 1e-4 (a run script's setting)",
        Mis(rs_veto_threshold=1e-4),
    ),
    "mis_token_clip": (
        "token weights clipped to [0.5, 2]",
        Mis(tis_mode="clip", use_rs=False, tis_batch_normalize=False),
    ),
    "mis_token_mask": (
        "tokens with a ratio outside [0.5, 2] dropped",
        Mis(tis_mode="mask", use_rs=False, tis_batch_normalize=False),
    ),
    "mis_sequence_truncate": (
        "sequence weight exp(Σℓ) truncated at 2",
        Mis(tis_level="sequence", use_rs=False, tis_batch_normalize=False),
    ),
    "mis_geometric_mask": (
        "rows whose geometric-mean ratio leaves [0.9999, 1.0001] dropped",
        Mis(
            tis_level="geometric",
            tis_mode="mask",
            tis_lower_bound=0.9999,
            tis_upper_bound=1.0001,
            use_rs=False,
            tis_batch_normalize=False,
        ),
    ),
}

SHARED = (
    "weights: verl's token/sequence raw-weight arrays (the same ±20 clamp), shared; own components"
)

PRESETS = (
    Preset(
        f"{ID}:tis",
        "--use-tis: W = clamp(ρ, 0, 2), ρ unclamped",
        {"use_tis": True, "tis_clip": TIS_CLIP, "tis_clip_low": TIS_CLIP_LOW},
        tis_plan(),
        "own components (ρ unclamped)",
    ),
    Preset(
        f"{ID}:icepop",
        "icepop_function: W = ρ inside [0, 2], else 0",
        {
            "use_tis": True,
            "custom_tis_function_path": "slime.backends.megatron_utils.loss.icepop_function",
            "tis_clip": TIS_CLIP,
            "tis_clip_low": TIS_CLIP_LOW,
        },
        icepop_plan(),
        "own components (ρ unclamped)",
    ),
    *(
        Preset(
            f"{ID}:{name}",
            purpose,
            options.config(),
            mis_plan(options),
            SHARED if options.tis_level != "geometric" else "own components",
        )
        for name, (purpose, options) in MIS_VARIANTS.items()
    ),
)

FRAMEWORK = Framework(
    id=ID,
    title="slime",
    sources=SOURCES,
    metrics=(SlimeLogged(),),
    aggregation=(
        "a mean per sample over its valid tokens, summed, divided by the step's sample count "
        "(the default; --calculate-per-token-loss makes it a token mean, not reproduced)"
    ),
    presets=PRESETS,
)
