"""AllenAI open-instruct: the ``debug/`` comparison of vLLM and trainer log-probs and the metrics of
its default-on ρ correction.

Read on open-instruct's main branch at commit e6c3044 (2026-08-20): ``open_instruct/grpo_utils.py``
(``compute_vllm_local_debug_metrics``; ``compute_rho_correction`` and its options
``use_rho_correction`` True, ``rho_clamp_upper_bound`` 2.0, the other bounds 0 = off;
``populate_sample_loss_stats`` / ``compute_metrics_from_loss_stats``: per-micro-batch masked means
weighted by the micro-batch's token count) and ``open_instruct/grpo_fast.py`` (where they run, and
the mean over learners) (docs/frameworks.md, "open-instruct").
"""

from __future__ import annotations

import math
from dataclasses import dataclass
from typing import Any, ClassVar

import numpy as np

from rcdiag.correction.engine import Component, Getter, Metrics, RowStats, unbiased_std
from rcdiag.correction.external import Band, Ratio, Weights
from rcdiag.correction.modes import ModePlan
from rcdiag.correction.view import TokenView
from rcdiag.frameworks.base import Framework, Pin, Preset, Source, abs_log_ratio, prefixed
from rcdiag.metrics.grouped import Kind

ID = "open_instruct"
PIN = Pin("allenai/open-instruct", "main", "e6c3044aa6201c8bfa4573c1b03142af599e730d", "2026-08-20")
RHO_CLAMP = 10.0
"""compute_rho_correction clamps ℓ to ±10 before exponentiating it."""


@dataclass(frozen=True)
class OpenInstructDebug(Component):
    """Mean, max and sample standard deviation (N − 1; 0 for one token) of |ℓ| over valid tokens,
    and ``debug/vllm_local_reverse_kl``, the token mean of e^r·(r − o) (r the rollout log-prob, o
    the trainer's: each token weighted by its rollout probability)."""

    kinds: ClassVar[dict[str, Kind]] = {"abs_moments": "moments", "reverse_kl": "sum"}

    def row_stats(self, view: TokenView) -> RowStats:
        rollout = view.valid(view.rollout)  # garbage under the mask becomes 0
        with np.errstate(over="ignore", invalid="ignore"):
            reverse = -np.exp(rollout) * view.log_ratio  # ℓ is 0 where invalid
        return {
            "abs_moments": view.token_moments(abs_log_ratio(view)),
            "reverse_kl": view.row_sum(reverse),
        }

    def metrics(self, get: Getter) -> Metrics:
        valid = get("valid_tokens")
        return prefixed(
            ID,
            {
                "debug/vllm_vs_local_logprob_diff_mean": get("abs_log_ratio") / valid,
                "debug/vllm_vs_local_logprob_diff_max": get("abs_log_ratio_max"),
                "debug/vllm_vs_local_logprob_diff_std": unbiased_std(
                    get("abs_moments.n"), get("abs_moments.m2")
                ),
                "debug/vllm_local_reverse_kl": get("reverse_kl") / valid,
            },
        )


@dataclass(frozen=True)
class RhoOptions:
    """compute_rho_correction's options (0 disables a bound), defaults as in grpo_utils."""

    clamp_lower: float = 0.0
    clamp_upper: float = 2.0
    mask_lower: float = 0.0
    mask_upper: float = 0.0
    sequence_level: bool = False


def rho_effective(view: TokenView, options: RhoOptions) -> np.ndarray:
    """ρ = exp(clamp(ℓ, ±10)) per token, or with ``sequence_level`` exp of the row's mean of the
    clamped ℓ on each of its tokens (valid positions; 0 elsewhere)."""

    def compute() -> np.ndarray:
        clamped = np.clip(view.log_ratio, -RHO_CLAMP, RHO_CLAMP)
        if options.sequence_level:
            return view.valid(view.broadcast(np.exp(view.row_mean(clamped))))
        return view.valid(np.exp(clamped))

    return view.memo(("oi_rho", options.sequence_level), compute)


def rho_parts(view: TokenView, options: RhoOptions) -> dict[str, np.ndarray]:
    """Per position: ``low`` / ``high`` (dropped below / above the mask bounds), ``weight`` (the
    clamped ρ, 0 where dropped) and ``clipped`` (the clamp changed ρ); invalid positions False/0."""

    def compute() -> dict[str, np.ndarray]:
        r = rho_effective(view, options)
        low = view.mask & (r < options.mask_lower) if options.mask_lower > 0 else view.mask & False
        high = view.mask & (r > options.mask_upper) if options.mask_upper > 0 else view.mask & False
        clamped = r
        if options.clamp_lower > 0:
            clamped = np.maximum(clamped, options.clamp_lower)
        if options.clamp_upper > 0:
            clamped = np.minimum(clamped, options.clamp_upper)
        keep = view.mask & ~low & ~high
        return {
            "low": low,
            "high": high,
            "weight": np.where(keep, clamped, 0.0),
            "clipped": view.mask & (clamped != r),
        }

    return view.memo(("oi_rho_parts", options), compute)


@dataclass(frozen=True)
class OpenInstructRho(Component):
    """``val/rho_weight``, ``val/rho_clipfrac``, ``val/rho_drop_frac``, ``_low_frac``,
    ``_high_frac``: token means over the step's valid tokens of the weight and of the flags."""

    options: RhoOptions = RhoOptions()

    kinds: ClassVar[dict[str, Kind]] = {
        "rho_weight": "sum",
        "rho_clipped": "sum",
        "rho_low": "sum",
        "rho_high": "sum",
    }

    def row_stats(self, view: TokenView) -> RowStats:
        parts = rho_parts(view, self.options)
        return {
            "rho_weight": view.row_sum(parts["weight"]),
            "rho_clipped": view.count(parts["clipped"]),
            "rho_low": view.count(parts["low"]),
            "rho_high": view.count(parts["high"]),
        }

    def metrics(self, get: Getter) -> Metrics:
        valid = get("valid_tokens")
        return prefixed(
            ID,
            {
                "val/rho_weight": get("rho_weight") / valid,
                "val/rho_clipfrac": get("rho_clipped") / valid,
                "val/rho_drop_frac": (get("rho_low") + get("rho_high")) / valid,
                "val/rho_drop_low_frac": get("rho_low") / valid,
                "val/rho_drop_high_frac": get("rho_high") / valid,
            },
        )


def rho_ratio(options: RhoOptions) -> Ratio:
    """ρ as compute_rho_correction takes it: exp of ℓ clamped to ±10, per token or of the row's
    mean of the clamped ℓ."""
    if options.sequence_level:
        return Ratio("geometric", RHO_CLAMP, clamp_tokens=True)
    return Ratio("token", RHO_CLAMP)


def rho_weights(options: RhoOptions) -> Weights:
    """ρ clamped to [clamp_lower, clamp_upper] (0: that side off), set to 0 outside the mask bounds
    (the token's loss is zeroed, the loss keeps its token count)."""
    ratio = rho_ratio(options)
    hi = options.clamp_upper if options.clamp_upper > 0 else math.inf
    band = Band(
        ratio, options.mask_lower, options.mask_upper if options.mask_upper > 0 else math.inf
    )
    return Weights(ratio, "clip", lo=options.clamp_lower, hi=hi, zero=(band,))


@dataclass(frozen=True)
class OpenInstructPlan(ModePlan):
    options: RhoOptions = RhoOptions()

    def components(self) -> tuple[Component, ...]:
        return (OpenInstructRho(self.options), self.outcome())


def rho_config(options: RhoOptions) -> dict[str, Any]:
    """The options of grpo_fast's configuration (``--name value`` on its command line)."""
    return {
        "use_rho_correction": True,
        "rho_clamp_lower_bound": options.clamp_lower,
        "rho_clamp_upper_bound": options.clamp_upper,
        "rho_mask_lower_bound": options.mask_lower,
        "rho_mask_upper_bound": options.mask_upper,
        "rho_mask_sequence_level": options.sequence_level,
    }


MODES: dict[str, tuple[str, RhoOptions]] = {
    "rho": ("ρ clamped at 2 (use_rho_correction's defaults)", RhoOptions()),
    "rho_icepop": (
        "ρ set to 0 outside [0.5, 5], no clamp",
        RhoOptions(clamp_upper=0.0, mask_lower=0.5, mask_upper=5.0),
    ),
    "rho_sequence_mask": (
        "per row ρ of the mean ℓ, clamped at 2, set to 0 outside [0.5, 2]",
        RhoOptions(mask_lower=0.5, mask_upper=2.0, sequence_level=True),
    ),
}

PRESETS = tuple(
    Preset(
        f"{ID}:{name}",
        purpose,
        rho_config(options),
        OpenInstructPlan(ID, rho_weights(options), options=options),
        "own components (ℓ clamped to ±10)",
    )
    for name, (purpose, options) in MODES.items()
)

FRAMEWORK = Framework(
    id=ID,
    title="open-instruct",
    sources=(
        Source(
            PIN.repo,
            "open_instruct/grpo_utils.py",
            PIN.commit,
            "compute_vllm_local_debug_metrics: debug/vllm_vs_local_logprob_diff_{mean,max,std}, "
            "debug/vllm_local_reverse_kl; compute_rho_correction: val/rho_*; the rho options",
        ),
        Source(
            PIN.repo,
            "open_instruct/grpo_fast.py",
            PIN.commit,
            "the learner's training step: debug metrics per micro-batch (the last one is kept), "
            "val/ metrics token-weighted over micro-batches, averaged over learners",
        ),
    ),
    pin=PIN,
    metrics=(OpenInstructDebug(), OpenInstructRho()),
    presets=PRESETS,
    aggregation=(
        "debug/: each micro-batch overwrites the last, so the logged value is the last "
        "micro-batch's (rcdiag: the step as one micro-batch); val/rho_*: token means over the "
        "step (micro-batches weighted by their tokens: exact with one learner; rho_weight and "
        "rho_clipfrac are then a plain mean over learners)"
    ),
    aliases=("open-instruct", "openinstruct"),
)
