"""Hugging Face TRL's ``GRPOTrainer``: its vLLM importance-sampling correction and what it logs.

Read on TRL's main branch at commit f2cd577 (2026-07-24): ``trl/trainer/grpo_config.py`` for the
options and their defaults, and ``_generate_and_score_completions`` of ``trl/trainer/grpo_trainer.py``
that computes the ratio and logs ``sampling/…`` (docs/frameworks.md, "TRL").
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any, ClassVar

import numpy as np

from rcdiag.correction.engine import Component, Getter, Metrics, RowStats
from rcdiag.correction.external import Band, Ratio, Weights
from rcdiag.correction.modes import ModePlan
from rcdiag.correction.view import TokenView
from rcdiag.frameworks.base import Framework, Pin, Preset, Source, prefixed
from rcdiag.metrics.grouped import Kind

ID = "trl"
DEFAULT_CAP = 3.0
"""``vllm_importance_sampling_clip_max``'s default (``vllm_importance_sampling_clip_min``'s is None:
no lower bound). ``vllm_importance_sampling_cap`` is its deprecated name, until TRL 2.0."""
PIN = Pin("huggingface/trl", "main", "f2cd57710ae345ea6428ae95363267fcf38a3dc8", "2026-07-24")
DEFAULT_MODE = "sequence_mask"
"""``vllm_importance_sampling_mode``'s default (the docstring calls token_truncate the default; the
field's default value is sequence_mask, and that is what runs)."""
MODES = ("token_truncate", "token_mask", "sequence_truncate", "sequence_mask")

SOURCES = (
    Source(
        PIN.repo,
        "trl/trainer/grpo_config.py",
        PIN.commit,
        "vllm_importance_sampling_correction (True), _mode (sequence_mask), _clip_max (3.0), "
        "_clip_min (None); _cap deprecated",
    ),
    Source(
        PIN.repo,
        "trl/trainer/grpo_trainer.py",
        PIN.commit,
        "_generate_and_score_completions: the IS ratio per mode and the sampling/ metrics",
    ),
)


def mode_weights(mode: str, cap: float = DEFAULT_CAP, low: float | None = None) -> Weights:
    """TRL's ratio: exp of ℓ per token or of S_i per row, unclamped; ``truncate`` clamps it to
    [C_min, C_max] (no lower bound when C_min is None), ``mask`` sets a ratio outside [C_min, C_max]
    to 0 (the bounds themselves are kept)."""
    ratio = Ratio("token" if mode.startswith("token") else "sequence")
    if mode.endswith("truncate"):
        if low is None:
            return Weights(ratio, "truncate", hi=cap)
        return Weights(ratio, "clip", lo=low, hi=cap)
    return Weights(ratio, zero=(Band(ratio, 0.0 if low is None else low, cap),))


@dataclass(frozen=True)
class TrlLogged(Component):
    """``sampling/sampling_logp_difference/{mean,max}`` and ``sampling/importance_sampling_ratio/
    {min,mean,max}`` of one mode: the ratio after its cap, over the valid tokens (token modes) or
    over every row of the batch, an empty one's ratio being exp(0) = 1 (sequence modes)."""

    weights: Weights

    kinds: ClassVar[dict[str, Kind]] = {
        "ratio_sum": "sum",
        "ratio_count": "sum",
        "ratio_min": "min",
        "ratio_max": "max",
    }

    def row_stats(self, view: TokenView) -> RowStats:
        if self.weights.ratio.row_level:
            rows = self.weights.rows(view)
            return {
                "ratio_sum": rows,
                "ratio_count": np.ones(rows.size),
                "ratio_min": rows,
                "ratio_max": rows,
            }
        applied = self.weights.applied(view)
        return {
            "ratio_sum": view.row_sum(applied),
            "ratio_count": view.n,
            "ratio_min": view.valid_min(applied),
            "ratio_max": view.valid_max(applied),
        }

    def metrics(self, get: Getter) -> Metrics:
        valid = get("valid_tokens")
        return prefixed(
            ID,
            {
                "sampling/sampling_logp_difference/mean": get("abs_log_ratio") / valid,
                "sampling/sampling_logp_difference/max": get("abs_log_ratio_max"),
                "sampling/importance_sampling_ratio/min": get("ratio_min"),
                "sampling/importance_sampling_ratio/mean": get("ratio_sum") / get("ratio_count"),
                "sampling/importance_sampling_ratio/max": get("ratio_max"),
            },
        )


@dataclass(frozen=True)
class TrlPlan(ModePlan):
    """A TRL mode: IS weights only (a masked ratio is a zero weight; the completion mask, and so
    the loss's token count, stays)."""

    def components(self) -> tuple[Component, ...]:
        assert self.weights is not None
        return (TrlLogged(self.weights), self.outcome())


def plan(mode: str = DEFAULT_MODE, cap: float = DEFAULT_CAP, low: float | None = None) -> TrlPlan:
    return TrlPlan(ID, mode_weights(mode, cap, low))


def config(mode: str, cap: float = DEFAULT_CAP, low: float | None = None) -> dict[str, Any]:
    """The GRPOConfig keys of a mode."""
    keys: dict[str, Any] = {
        "vllm_importance_sampling_correction": True,
        "vllm_importance_sampling_mode": mode,
        "vllm_importance_sampling_clip_max": cap,
    }
    if low is not None:
        keys["vllm_importance_sampling_clip_min"] = low
    return keys


PURPOSES = {
    "token_truncate": "per-token ratio capped at C = 3",
    "token_mask": "per-token ratio set to 0 above C = 3",
    "sequence_truncate": "sequence ratio exp(Σℓ) capped at C = 3",
    "sequence_mask": "sequence ratio set to 0 above C = 3 (TRL's default)",
}

TWO_SIDED_LOW = 0.5
"""The lower bound of the two-sided presets: ``vllm_importance_sampling_clip_min`` has no default
(None: one-sided); 0.5 is an example, IcePop's usual lower bound."""
TWO_SIDED = {
    "token_mask_two_sided": (
        "token_mask",
        "per-token ratio set to 0 outside [0.5, 3] (clip_min 0.5)",
    ),
    "sequence_mask_two_sided": (
        "sequence_mask",
        "sequence ratio set to 0 outside [0.5, 3] (clip_min 0.5)",
    ),
}

PRESETS = tuple(
    Preset(
        f"{ID}:{mode}",
        PURPOSES[mode],
        config(mode),
        plan(mode),
        "own components (TRL exponentiates ℓ unclamped; verl clamps to ±20)",
    )
    for mode in MODES
) + tuple(
    Preset(
        f"{ID}:{name}",
        purpose,
        config(mode, low=TWO_SIDED_LOW),
        plan(mode, low=TWO_SIDED_LOW),
        "own components (TRL exponentiates ℓ unclamped; verl clamps to ±20)",
    )
    for name, (mode, purpose) in TWO_SIDED.items()
)

FRAMEWORK = Framework(
    id=ID,
    title="TRL",
    sources=SOURCES,
    pin=PIN,
    metrics=(TrlLogged(mode_weights(DEFAULT_MODE)),),
    aggregation=(
        "per process and generation batch: a token mean (sampling_logp_difference/mean) over the "
        "process's completions, then the mean over processes (max and min over processes), and "
        "the logged value is the mean over the generation batches of a logging_steps window; "
        "rcdiag takes a step as one process's one batch"
    ),
    presets=PRESETS,
)
