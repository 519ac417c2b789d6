"""AReaL's ``actor.rejection_sampling`` as dry-runs, and the statistics it logs (docs/frameworks.md).

Read from ``apply_rejection_sampling`` / ``ppo_actor_loss_fn`` (``areal/utils/functional/
functional.py``), ``KLEstimator._compute_approx_kl`` (``areal/utils/data.py``) and
``RejectionSamplingConfig`` (``areal/api/cli_args.py``) at AReaL's main 4aef98d (identical in the
PyPI release 1.0.4). The gated statistic per token: the ratio ρ = e^ℓ, or k1 = ℓ, k2 = ℓ²/2,
k3 = e^(−ℓ) − 1 + ℓ (no clamping). At sequence level it is aggregated over the row's valid tokens
(ratio: in log space, exp of the sum / mean / max of ℓ; a KL metric: its sum / mean / max; an
empty row gives 0 before the exp); kept when lower ≤ x ≤ upper (no lower bound when None).
``mask`` drops the tokens (rows) outside; ``clamp`` (ratio only) clamps the weight to
[lower or 0, upper] (at sequence level only in the rows outside). The weight is ρ per token, or
with the ratio metric at sequence level the row's geometric-mean ratio exp(mean ℓ).
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any, ClassVar

import numpy as np

from rcdiag.correction.engine import Component, Getter, Metrics, RowStats
from rcdiag.correction.external import Ratio, RowRule, TokenRule, Weights, ratio_tokens
from rcdiag.correction.modes import ModePlan
from rcdiag.correction.view import TokenView
from rcdiag.frameworks.base import Preset, prefixed
from rcdiag.metrics.grouped import Kind
from rcdiag.metrics.ragged import F64, Bool, segment_max

ID = "areal"
PREFIX = "actor.rejection_sampling."


@dataclass(frozen=True)
class Rs:
    """RejectionSamplingConfig (defaults as AReaL's)."""

    level: str = "token"
    action: str = "mask"
    metric: str = "ratio"
    agg: str = "mean"
    upper: float = 5.0
    lower: float | None = None

    def config(self) -> dict[str, Any]:
        """The keys a user sets: rejection sampling applies only with the decoupled loss."""
        out: dict[str, Any] = {"actor.use_decoupled_loss": True}
        keys: dict[str, Any] = {"level": self.level, "action": self.action, "metric": self.metric}
        if self.level == "sequence":
            keys["agg"] = self.agg
        keys["upper"] = self.upper
        if self.lower is not None:
            keys["lower"] = self.lower
        return out | {PREFIX + k: v for k, v in keys.items()}

    def inside(self, x: F64) -> Bool:
        keep = x <= self.upper
        return keep if self.lower is None else keep & (x >= self.lower)


def token_metric(view: TokenView, metric: str) -> F64:
    """The per-token statistic (0 where invalid: ℓ is 0 there; the ratio 1 is masked by callers)."""
    ell = view.log_ratio
    with np.errstate(over="ignore"):
        if metric == "ratio":
            return np.exp(ell)
        if metric == "kl_k1":
            return ell
        if metric == "kl_k2":
            return 0.5 * ell * ell
        return np.expm1(-ell) + ell


def row_metric(view: TokenView, rs: Rs) -> F64:
    """The per-row statistic of sequence level (an empty row's aggregate is 0)."""
    values = view.log_ratio if rs.metric == "ratio" else view.valid(token_metric(view, rs.metric))
    if rs.agg == "sum":
        agg = view.row_sum(values)
    elif rs.agg == "mean":
        agg = view.row_sum(values) / np.maximum(view.n, 1.0)
    else:
        agg = np.where(view.nonempty, segment_max(view.valid(values, -np.inf), view.offsets), 0.0)
    if rs.metric != "ratio":
        return agg
    with np.errstate(over="ignore"):
        return np.exp(agg)


def inside(view: TokenView, rs: Rs) -> Bool:
    """Per position: the token (its row, at sequence level) is inside the bounds."""

    def compute() -> Bool:
        if rs.level == "sequence":
            return view.broadcast(rs.inside(row_metric(view, rs)))
        return view.or_invalid(rs.inside(token_metric(view, rs.metric)))

    return view.memo(("areal_inside", rs), compute)


def base_ratio(rs: Rs) -> Ratio:
    return Ratio("geometric" if rs.level == "sequence" and rs.metric == "ratio" else "token")


@dataclass(frozen=True)
class ArealWeights(Weights):
    """The weight AReaL multiplies the loss by (before the mask): ρ or the geometric-mean ratio,
    clamped by the clamp action."""

    rs: Rs = Rs()

    def applied(self, view: TokenView) -> F64:
        def compute() -> F64:
            raw = ratio_tokens(view, self.ratio)
            if self.rs.action != "clamp":
                return raw
            lo = 0.0 if self.rs.lower is None else self.rs.lower
            clamped = view.valid(np.clip(raw, lo, self.rs.upper))
            if self.rs.level == "token":
                return clamped
            return np.where(inside(view, self.rs), raw, clamped)

        return view.memo(("areal_weights", self.rs), compute)


@dataclass(frozen=True)
class ArealTokenMask(TokenRule):
    rs: Rs

    def inside(self, view: TokenView) -> Bool:
        return inside(view, self.rs)


@dataclass(frozen=True)
class ArealRowMask(RowRule):
    rs: Rs

    def keep_rows(self, view: TokenView) -> Bool:
        return self.rs.inside(row_metric(view, self.rs))


def weights(rs: Rs) -> ArealWeights:
    return ArealWeights(base_ratio(rs), rs=rs)


@dataclass(frozen=True)
class ArealLogged(Component):
    """Over the kept tokens K (valid, inside the mask, weight > 0): ``behave_imp_weight/{avg,min,
    max}`` of the weight and ``behave_approx_kl/{avg,min,max}`` of ℓ; ``rs_filtered_fraction``: the
    share of valid tokens the mask drops, or whose weight the clamp changes."""

    rs: Rs = Rs()

    kinds: ClassVar[dict[str, Kind]] = {
        "kept": "sum",
        "filtered": "sum",
        "w_sum": "sum",
        "w_min": "min",
        "w_max": "max",
        "ell_sum": "sum",
        "ell_min": "min",
        "ell_max": "max",
    }

    def row_stats(self, view: TokenView) -> RowStats:
        rs = self.rs
        w = weights(rs).applied(view)
        keep = view.mask & (inside(view, rs) if rs.action == "mask" else True)
        kept = keep & (w > 0)
        if rs.action == "mask":
            filtered = view.mask & ~keep
        else:
            filtered = view.mask & (w != ratio_tokens(view, base_ratio(rs)))
        ell = view.log_ratio
        return {
            "kept": view.count(kept),
            "filtered": view.count(filtered),
            "w_sum": view.row_sum(np.where(kept, w, 0.0)),
            "w_min": view.valid_min(np.where(kept, w, np.inf)),
            "w_max": view.valid_max(np.where(kept, w, -np.inf)),
            "ell_sum": view.row_sum(np.where(kept, ell, 0.0)),
            "ell_min": view.valid_min(np.where(kept, ell, np.inf)),
            "ell_max": view.valid_max(np.where(kept, ell, -np.inf)),
        }

    def metrics(self, get: Getter) -> Metrics:
        kept = get("kept")

        def over_kept(name: str) -> float | None:  # AReaL logs nothing without a kept token
            return None if kept == 0 else get(name)

        return prefixed(
            ID,
            {
                "behave_imp_weight/avg": get("w_sum") / kept if kept else None,
                "behave_imp_weight/min": over_kept("w_min"),
                "behave_imp_weight/max": over_kept("w_max"),
                "behave_approx_kl/avg": get("ell_sum") / kept if kept else None,
                "behave_approx_kl/min": over_kept("ell_min"),
                "behave_approx_kl/max": over_kept("ell_max"),
                "rs_filtered_fraction": get("filtered") / get("valid_tokens"),
            },
        )


@dataclass(frozen=True)
class ArealPlan(ModePlan):
    rs: Rs = Rs()

    def components(self) -> tuple[Component, ...]:
        return (ArealLogged(self.rs), self.outcome())


def plan(rs: Rs) -> ArealPlan:
    rules: tuple[TokenRule | RowRule, ...] = ()
    if rs.action == "mask":
        rules = (ArealRowMask(rs),) if rs.level == "sequence" else (ArealTokenMask(rs),)
    return ArealPlan(ID, weights(rs), rules, rs=rs)


MODES: dict[str, tuple[str, Rs]] = {
    "token_mask": ("tokens with ρ > 5 dropped (RejectionSamplingConfig's defaults)", Rs()),
    "token_clamp": ("token weights ρ clamped to [0, 5]", Rs(action="clamp")),
    "sequence_mask": (
        "rows whose geometric-mean ratio exceeds 5 dropped; weight: that ratio",
        Rs(level="sequence"),
    ),
    "sequence_clamp": (
        "geometric-mean weight, clamped to [0, 5] in rows above 5",
        Rs(level="sequence", action="clamp"),
    ),
}

PRESETS = tuple(
    Preset(
        f"{ID}:{name}",
        purpose,
        rs.config(),
        plan(rs),
        "own components (AReaL exponentiates ℓ unclamped)",
    )
    for name, (purpose, rs) in MODES.items()
)
