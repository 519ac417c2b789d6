"""NeMo-RL's advantage-free correction modes as dry-runs (docs/frameworks.md, "Corrections").

Read from ``ClippedPGLossFn`` (``nemo_rl/algorithms/loss/loss_functions.py``) and
``compute_and_apply_seq_logprob_error_masking`` (``nemo_rl/algorithms/grpo.py``) at NeMo-RL's main
7ea279a: the IS weight e^ℓ per token (unclamped), bounded by ``truncated_importance_sampling_type``
(``tis``: clamp to [min, max], min defaulting to 0; ``icepop``: 0 outside [min, max];
``seq-mask-tis``: 0 on rows whose geometric-mean ratio leaves [min, max]), applied with
``use_importance_sampling_correction``; and ``grpo.seq_logprob_error_threshold``, which drops a
sequence whose mean e^|ℓ| exceeds it. NeMo-RL has no defaults for the bounds; the presets use the
values its example configurations and code comments give.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any, ClassVar

import numpy as np

from rcdiag.correction.engine import Component, Getter, Metrics, RowStats
from rcdiag.correction.external import (
    Band,
    MeanExpAbsRows,
    Ratio,
    Weights,
    mean_exp_abs_rows,
    ratio_rows,
)
from rcdiag.correction.modes import ModePlan
from rcdiag.correction.view import TokenView
from rcdiag.frameworks.base import Preset, prefixed, rho
from rcdiag.metrics.grouped import Kind

ID = "nemo_rl"
LOSS = "loss_fn."
GRPO = "grpo."
TYPES = ("tis", "icepop", "seq-mask-tis")


def weights(kind: str | None, low: float | None, high: float | None) -> Weights:
    """e^ℓ per token (unclamped), bounded as the truncated_importance_sampling_type says."""
    token = Ratio("token")
    if kind is None or high is None:
        return Weights(token)
    lo = 0.0 if low is None else low
    if kind == "tis":
        return Weights(token, "clip", lo=lo, hi=high)
    gate = token if kind == "icepop" else Ratio("geometric")
    return Weights(token, zero=(Band(gate, lo, high),))


@dataclass(frozen=True)
class NemoModeLogged(Component):
    """``sampling_importance_ratio`` (token mean of the bounded weight, an overflow to ∞ counting
    0) and, with a truncation type, ``is_oob_ratio``: the share of valid tokens whose ratio leaves
    [min, max] (tis, icepop), or of rows whose geometric-mean ratio does (seq-mask-tis). With the
    sequence mask: ``{max,mean,min}_seq_mult_prob_error_after_mask`` over the kept rows with
    valid tokens (0 when none is kept) and ``num_masked_seqs``."""

    kind: str | None
    low: float | None
    high: float | None
    threshold: float | None = None

    kinds: ClassVar[dict[str, Kind]] = {
        "nemo_weight": "sum",
        "nemo_oob": "sum",
        "nemo_kept_rows": "sum",
        "nemo_masked_rows": "sum",
        "nemo_after_sum": "sum",
        "nemo_after_max": "max",
        "nemo_after_min": "min",
    }

    def row_stats(self, view: TokenView) -> RowStats:
        applied = weights(self.kind, self.low, self.high).applied(view)
        stats: RowStats = {"nemo_weight": view.row_sum(np.where(np.isinf(applied), 0.0, applied))}
        lo = 0.0 if self.low is None else self.low
        hi = np.inf if self.high is None else self.high
        if self.kind == "seq-mask-tis":
            rows = ratio_rows(view, Ratio("geometric"))
            stats["nemo_oob"] = ((rows < lo) | (rows > hi)).astype(np.float64)
        else:
            r = rho(view)
            stats["nemo_oob"] = view.count((r < lo) | (r > hi))
        per_row = mean_exp_abs_rows(view)
        kept = view.nonempty.copy()
        if self.threshold is not None:
            kept &= per_row <= self.threshold
            stats["nemo_masked_rows"] = (per_row > self.threshold).astype(np.float64)
        stats["nemo_kept_rows"] = kept.astype(np.float64)
        stats["nemo_after_sum"] = np.where(kept, per_row, 0.0)
        stats["nemo_after_max"] = np.where(kept, per_row, -np.inf)
        stats["nemo_after_min"] = np.where(kept, per_row, np.inf)
        return stats

    def metrics(self, get: Getter) -> Metrics:
        out: Metrics = {"sampling_importance_ratio": get("nemo_weight") / get("valid_tokens")}
        if self.kind is not None:
            total = get("rows") if self.kind == "seq-mask-tis" else get("valid_tokens")
            out["is_oob_ratio"] = get("nemo_oob") / total
        if self.threshold is not None:
            kept = get("nemo_kept_rows")
            out["max_seq_mult_prob_error_after_mask"] = get("nemo_after_max") if kept else 0.0
            out["mean_seq_mult_prob_error_after_mask"] = (
                get("nemo_after_sum") / kept if kept else 0.0
            )
            out["min_seq_mult_prob_error_after_mask"] = get("nemo_after_min") if kept else 0.0
            out["num_masked_seqs"] = get("nemo_masked_rows")
        return prefixed(ID, out)


@dataclass(frozen=True)
class NemoPlan(ModePlan):
    kind: str | None = None
    low: float | None = None
    high: float | None = None
    threshold: float | None = None

    def components(self) -> tuple[Component, ...]:
        return (NemoModeLogged(self.kind, self.low, self.high, self.threshold), self.outcome())


def plan(
    kind: str | None = None,
    low: float | None = None,
    high: float | None = None,
    threshold: float | None = None,
    use_is: bool = True,
) -> NemoPlan:
    """A mode: IS weights (None without ``use_importance_sampling_correction``) and the sequence
    mask of ``seq_logprob_error_threshold``."""
    rules = (MeanExpAbsRows(threshold),) if threshold is not None else ()
    w = weights(kind, low, high) if use_is else None
    return NemoPlan(ID, w, rules, kind=kind, low=low, high=high, threshold=threshold)


def config(
    kind: str | None = None,
    low: float | None = None,
    high: float | None = None,
    threshold: float | None = None,
    use_is: bool = True,
) -> dict[str, Any]:
    """The keys of a mode, as a NeMo-RL configuration spells them (``loss_fn.…``, ``grpo.…``)."""
    out: dict[str, Any] = {f"{LOSS}use_importance_sampling_correction": use_is}
    if kind is not None:
        out[f"{LOSS}truncated_importance_sampling_type"] = kind
        out[f"{LOSS}truncated_importance_sampling_ratio"] = high
        out[f"{LOSS}truncated_importance_sampling_ratio_min"] = low
    if threshold is not None:
        out[f"{GRPO}seq_logprob_error_threshold"] = threshold
    return out


MODES: dict[str, tuple[str, dict[str, Any]]] = {
    "is": ("IS weights e^ℓ per token, unbounded", {}),
    "tis": ("weights clamped to [0, 2] (type tis, ratio 2)", {"kind": "tis", "high": 2.0}),
    "icepop": (
        "weights set to 0 outside [0.5, 5] (type icepop)",
        {"kind": "icepop", "low": 0.5, "high": 5.0},
    ),
    "seq-mask-tis": (
        "weights set to 0 on rows whose geometric-mean ratio leaves [0.999, 1.002]",
        {"kind": "seq-mask-tis", "low": 0.999, "high": 1.002},
    ),
    "seq_logprob_error_mask": (
        "rows whose mean e^|ℓ| exceeds 2 dropped (grpo.seq_logprob_error_threshold), no IS",
        {"threshold": 2.0, "use_is": False},
    ),
}

PRESETS = tuple(
    Preset(
        f"{ID}:{name}",
        purpose,
        config(**options),
        plan(**options),
        "own components (NeMo-RL exponentiates ℓ unclamped)",
    )
    for name, (purpose, options) in MODES.items()
)
