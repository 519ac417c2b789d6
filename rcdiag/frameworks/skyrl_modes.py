"""SkyRL's off-policy correction modes as dry-runs (docs/frameworks.md, "Corrections").

Read from ``compute_off_policy_correction`` (``skyrl/backends/skyrl_train/utils/
off_policy_correction_utils.py``) and ``OffPolicyCorrectionConfig`` (``skyrl/train/config/config.py``)
at SkyRL's main a956457: every ratio is exp(clamp(old − rollout, ±20)) (``safe_exp_delta``). TIS
weights min(ratio, cap) per token or per sequence (exp of the clamped sum); the sequence masks drop
rows whose geometric-mean (clamped mean) or product (clamped sum) ratio leaves their band; the
outlier-token mask drops a row holding a token outside its thresholds; the token mask drops tokens
outside [low, high]. Defaults: token cap 2.0, sequence cap 5.0, geometric [0.99, 1.01], product
[0.5, 2.0]; the outlier and token masks have none (the presets use the values SkyRL's docstrings
suggest: 1e-4 and 100 for the outliers; [0.5, 2] for the token mask).
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any, ClassVar

import numpy as np

from rcdiag.correction.engine import Component, Getter, Metrics, RowStats
from rcdiag.correction.external import (
    Band,
    OutlierRows,
    Ratio,
    Rule,
    Weights,
    ratio_rows,
    ratio_tokens,
)
from rcdiag.correction.modes import ModePlan
from rcdiag.correction.view import TokenView
from rcdiag.frameworks.base import Preset, prefixed
from rcdiag.metrics.grouped import Kind

ID = "skyrl"
PREFIX = "trainer.algorithm.off_policy_correction."
CLAMP = 20.0
TOKEN = Ratio("token", CLAMP)
SEQUENCE = Ratio("sequence", CLAMP)
GEOMETRIC = Ratio("geometric", CLAMP)

Bounds = tuple[float, float]


@dataclass(frozen=True)
class Skyrl:
    """OffPolicyCorrectionConfig's options (None: off)."""

    tis_ratio_type: str | None = None
    token_tis_ratio_clip_high: float = 2.0
    sequence_tis_ratio_clip_high: float = 5.0
    sequence_mask_metric: str | None = None
    geo_mask: Bounds = (0.99, 1.01)
    product_mask: Bounds = (0.5, 2.0)
    outlier_token_is_threshold_low: float | None = None
    outlier_token_is_threshold_high: float | None = None
    token_mask: Bounds | None = None

    def config(self) -> dict[str, Any]:
        """The keys a user sets (``trainer.algorithm.off_policy_correction.`` + name)."""
        out: dict[str, Any] = {}
        if self.tis_ratio_type is not None:
            out["tis_ratio_type"] = self.tis_ratio_type
            cap = f"{self.tis_ratio_type}_tis_ratio_clip_high"
            out[cap] = getattr(self, cap)
        if self.sequence_mask_metric is not None:
            out["sequence_mask_metric"] = self.sequence_mask_metric
            lo, hi = (
                self.geo_mask if self.sequence_mask_metric == "geometric" else self.product_mask
            )
            name = "geo_mask" if self.sequence_mask_metric == "geometric" else "product_mask"
            out[f"{name}_high"], out[f"{name}_low"] = hi, lo
        for side in ("low", "high"):
            value = getattr(self, f"outlier_token_is_threshold_{side}")
            if value is not None:
                out[f"outlier_token_is_threshold_{side}"] = value
        if self.token_mask is not None:
            out["token_mask_is_threshold_low"], out["token_mask_is_threshold_high"] = (
                self.token_mask
            )
        return {PREFIX + k: v for k, v in out.items()}

    def weights(self) -> Weights | None:
        if self.tis_ratio_type == "token":
            return Weights(TOKEN, "truncate", hi=self.token_tis_ratio_clip_high)
        if self.tis_ratio_type == "sequence":
            return Weights(SEQUENCE, "truncate", hi=self.sequence_tis_ratio_clip_high)
        return None

    def rules(self) -> tuple[Rule, ...]:
        out: list[Rule] = []
        low, high = self.outlier_token_is_threshold_low, self.outlier_token_is_threshold_high
        if low is not None or high is not None:
            out.append(OutlierRows(low, high, CLAMP))
        if self.token_mask is not None:
            out.append(Band(TOKEN, *self.token_mask))
        if self.sequence_mask_metric == "geometric":
            out.append(Band(GEOMETRIC, *self.geo_mask))
        elif self.sequence_mask_metric == "product":
            out.append(Band(SEQUENCE, *self.product_mask))
        return tuple(out)


def _outside(values: np.ndarray, bounds: tuple[float | None, float | None]) -> tuple[Any, Any]:
    lo, hi = bounds
    under = values < lo if lo is not None else np.zeros(values.size, dtype=bool)
    over = values > hi if hi is not None else np.zeros(values.size, dtype=bool)
    return under, over


@dataclass(frozen=True)
class SkyrlModeLogged(Component):
    """The metrics compute_off_policy_correction logs for the options (each a share of the valid
    tokens or of the rows): tis_token_clip_high_ratio / tis_seq_clip_high_ratio;
    {geo,product}_sequence_mask_{masked,over_high,under_low}_ratio;
    outlier_seq_{masked,over_high,under_low}_ratio; token_mask_ratio."""

    options: Skyrl

    kinds: ClassVar[dict[str, Kind]] = {
        "tis_clip": "sum",
        "seq_masked": "sum",
        "seq_over": "sum",
        "seq_under": "sum",
        "out_masked": "sum",
        "out_over": "sum",
        "out_under": "sum",
        "token_masked": "sum",
        "sky_log_ratio_max": "max",
    }

    def row_stats(self, view: TokenView) -> RowStats:
        o = self.options
        token = ratio_tokens(view, TOKEN)
        zero = np.zeros(view.batch.rows)
        stats: RowStats = {name: zero for name, kind in self.kinds.items() if kind == "sum"}
        stats["sky_log_ratio_max"] = view.valid_max(view.log_ratio)
        if o.tis_ratio_type == "token":
            stats["tis_clip"] = view.count(token > o.token_tis_ratio_clip_high)
        elif o.tis_ratio_type == "sequence":
            rows = ratio_rows(view, SEQUENCE)
            stats["tis_clip"] = (rows > o.sequence_tis_ratio_clip_high).astype(np.float64)
        if o.sequence_mask_metric is not None:
            geometric = o.sequence_mask_metric == "geometric"
            rows = ratio_rows(view, GEOMETRIC if geometric else SEQUENCE)
            under, over = _outside(rows, o.geo_mask if geometric else o.product_mask)
            stats["seq_masked"] = (under | over).astype(np.float64)
            stats["seq_over"], stats["seq_under"] = (
                over.astype(np.float64),
                under.astype(np.float64),
            )
        bounds = (o.outlier_token_is_threshold_low, o.outlier_token_is_threshold_high)
        if bounds != (None, None):
            under, over = _outside(token, bounds)
            any_under, any_over = view.count(under) > 0, view.count(over) > 0
            stats["out_masked"] = (any_under | any_over).astype(np.float64)
            stats["out_over"], stats["out_under"] = (
                any_over.astype(np.float64),
                any_under.astype(np.float64),
            )
        if o.token_mask is not None:
            under, over = _outside(token, o.token_mask)
            stats["token_masked"] = view.count(under | over)
        return stats

    def metrics(self, get: Getter) -> Metrics:
        o = self.options
        rows, valid = get("rows"), get("valid_tokens")
        top = min(max(get("sky_log_ratio_max"), -CLAMP), CLAMP)
        out: Metrics = {
            "is_ratio_mean": get("token_weight") / valid,
            "is_ratio_max": float(np.exp(top)),
        }
        if o.tis_ratio_type == "token":
            out["tis_token_clip_high_ratio"] = get("tis_clip") / valid
        elif o.tis_ratio_type == "sequence":
            out["tis_seq_clip_high_ratio"] = get("tis_clip") / rows
        if o.sequence_mask_metric is not None:
            name = "geo" if o.sequence_mask_metric == "geometric" else "product"
            out[f"{name}_sequence_mask_masked_ratio"] = get("seq_masked") / rows
            out[f"{name}_sequence_mask_over_high_ratio"] = get("seq_over") / rows
            out[f"{name}_sequence_mask_under_low_ratio"] = get("seq_under") / rows
        if (o.outlier_token_is_threshold_low, o.outlier_token_is_threshold_high) != (None, None):
            out["outlier_seq_masked_ratio"] = get("out_masked") / rows
            out["outlier_seq_over_high_ratio"] = get("out_over") / rows
            out["outlier_seq_under_low_ratio"] = get("out_under") / rows
        if o.token_mask is not None:
            out["token_mask_ratio"] = get("token_masked") / valid
        return prefixed(ID, out)


@dataclass(frozen=True)
class SkyrlPlan(ModePlan):
    options: Skyrl = Skyrl()

    def components(self) -> tuple[Component, ...]:
        return (SkyrlModeLogged(self.options), self.outcome())


def plan(options: Skyrl) -> SkyrlPlan:
    return SkyrlPlan(ID, options.weights(), options.rules(), options=options)


MODES: dict[str, tuple[str, Skyrl]] = {
    "token_tis": ("token ratio truncated at 2 (tis_ratio_type token)", Skyrl("token")),
    "sequence_tis": ("sequence ratio truncated at 5 (tis_ratio_type sequence)", Skyrl("sequence")),
    "geometric_mask": (
        "rows whose geometric-mean ratio leaves [0.99, 1.01] dropped",
        Skyrl(sequence_mask_metric="geometric"),
    ),
    "product_mask": (
        "rows whose sequence ratio leaves [0.5, 2] dropped",
        Skyrl(sequence_mask_metric="product"),
    ),
    "outlier_token_mask": (
        "rows holding a token ratio below 1e-4 or above 100 dropped",
        Skyrl(outlier_token_is_threshold_low=1e-4, outlier_token_is_threshold_high=100.0),
    ),
    "token_mask": ("tokens with a ratio outside [0.5, 2] dropped", Skyrl(token_mask=(0.5, 2.0))),
}

PRESETS = tuple(
    Preset(
        f"{ID}:{name}",
        purpose,
        options.config(),
        plan(options),
        "weights and masks on verl's ±20-clamped ratio arrays, shared; own components",
    )
    for name, (purpose, options) in MODES.items()
)
