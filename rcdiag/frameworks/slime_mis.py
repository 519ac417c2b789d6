"""slime's mismatch helper (examples/train_infer_mismatch_helper/mis.py and mis.yaml on slime's main
branch, commit 624b824 of 2026-08-21): its options, what it computes as a plan, and the metrics it
logs."""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any, ClassVar, Literal

import numpy as np

from rcdiag.correction.engine import Component, Getter, Metrics, RowStats
from rcdiag.correction.external import (
    Band,
    Level,
    Ratio,
    Rule,
    Veto,
    Weights,
    ratio_rows,
    ratio_tokens,
)
from rcdiag.correction.modes import ModePlan
from rcdiag.correction.view import TokenView
from rcdiag.frameworks.base import prefixed
from rcdiag.frameworks.slime_metrics import (
    ID,
    SAFETY_BOUND,
    SlimeAbsDiff,
    SlimeMisPpl,
    _sample_means,
    _share_above,
    _share_below,
)
from rcdiag.metrics.grouped import Kind
from rcdiag.metrics.offpolicy import count_divisor

Mode = Literal["truncate", "clip", "mask"]


MIS_KEYS = (
    "use_tis",
    "use_rs",
    "tis_level",
    "rs_level",
    "tis_mode",
    "tis_lower_bound",
    "tis_upper_bound",
    "rs_lower_bound",
    "rs_upper_bound",
    "rs_veto_threshold",
    "tis_batch_normalize",
)
"""The keys of mis.yaml at the pinned commit, in its order; mis.py reads every one of them from the
arguments (``args.rs_veto_threshold`` only with ``use_rs``), so a YAML without one fails."""


@dataclass(frozen=True)
class Mis:
    """The MIS helper's options (mis.py; names as in its YAML; defaults as the shipped mis.yaml
    except the veto, which is None here and 1e-4 in the shipped file)."""

    tis_level: Level = "token"
    tis_mode: Mode = "truncate"
    tis_lower_bound: float | None = 0.5
    tis_upper_bound: float = 2.0
    use_rs: bool = True
    rs_level: Level = "token"
    rs_lower_bound: float | None = None
    rs_upper_bound: float | None = None
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
        """Every key of mis.yaml (:data:`MIS_KEYS`, in its order; a None is YAML's null)."""
        values = {"use_tis": True, **{k: getattr(self, k) for k in self.__dataclass_fields__}}
        return {k: values[k] for k in MIS_KEYS}


def mis_plan(options: Mis) -> SlimeMisPlan:
    """What compute_mis_weights does: weights at tis_level (log ratio clamped to ±20) bounded by
    tis_mode (``mask`` keeps them and drops the tokens outside the bounds), then, with use_rs, the
    tokens (or rows) whose rs_level ratio leaves the RS bounds are dropped, and the veto drops whole
    rows (a valid token with unclamped ℓ < ln τ); tis_batch_normalize divides by the batch mean of
    the weights."""
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
        "mis_rs_catastrophic_token_fraction": "sum",
        "mis_rs_catastrophic_seq_fraction": "sum",
        "final_mean": "sum",
        "final_min": "sum",
        "final_max": "sum",
        "norm_token_sum": "sum",
        "norm_row_mean": "sum",
    }

    def row_stats(self, view: TokenView) -> RowStats:
        options, weights = self.plan.options, self.plan.weights
        assert weights is not None
        lo, hi = options.lower, options.tis_upper_bound
        if weights.ratio.row_level:
            stats = self._row_weight_stats(view, weights)
        else:
            before = ratio_tokens(view, weights.ratio)
            after = weights.applied(view)
            if options.tis_mode == "truncate":
                a, b = _share_above(view, before, hi), np.zeros(view.batch.rows)
            else:
                a, b = _share_below(view, before, lo), _share_above(view, before, hi)
            stats = _sample_means(
                view, {"mis_tis_weight_before_bound": before, "mis_tis_weight_after_bound": after}
            )
            stats["mis_tis_fraction_a"], stats["mis_tis_fraction_b"] = a, b
            stats["final_mean"] = view.row_mean(after)
            stats["final_min"] = np.where(view.nonempty, view.valid_min(after), 0.0)
            stats["final_max"] = np.where(view.nonempty, view.valid_max(after), 0.0)
            stats["norm_token_sum"] = view.row_sum(after)  # the batch-normalisation μ's sums
            stats["norm_row_mean"] = view.row_mean(after)
        rs_lo, rs_hi = options.rs_bounds
        rs_ratio = Ratio(options.rs_level, SAFETY_BOUND)
        if rs_ratio.row_level:  # a sample's tokens all share its ratio: a share of 0 or 1
            rs = np.where(view.nonempty, ratio_rows(view, rs_ratio), np.nan)
            stats["mis_rs_mask_fraction_low"] = (rs < rs_lo).astype(np.float64)
            stats["mis_rs_mask_fraction_high"] = (rs > rs_hi).astype(np.float64)
        else:
            rs = ratio_tokens(view, rs_ratio)
            stats["mis_rs_mask_fraction_low"] = _share_below(view, rs, rs_lo)
            stats["mis_rs_mask_fraction_high"] = _share_above(view, rs, rs_hi)
        if options.rs_veto_threshold is not None:
            catastrophic = view.count_below(
                view.log_ratio, float(np.log(options.rs_veto_threshold))
            )
            stats["mis_rs_catastrophic_token_fraction"] = catastrophic / count_divisor(view.n)
            # every valid token of a sample with a catastrophic one: the sample's share is 1
            stats["mis_rs_catastrophic_seq_fraction"] = (catastrophic > 0).astype(np.float64)
        for name in ("mis_rs_catastrophic_token_fraction", "mis_rs_catastrophic_seq_fraction"):
            stats.setdefault(name, np.zeros(view.batch.rows))
        return stats

    def _row_weight_stats(self, view: TokenView, weights: Weights) -> RowStats:
        """The weight statistics of a sequence- or geometric-level ratio from one value per
        sample: its tokens all carry the sample's weight v, so a sample's mean, least and largest
        weight are v, its sum n·v, and the share of its tokens past a bound 0 or 1 (the token
        arrays give the same up to the rounding of their sums); an empty sample has 0."""
        options, n, nonempty = self.plan.options, view.n, view.nonempty
        lo, hi = options.lower, options.tis_upper_bound
        before = np.where(nonempty, ratio_rows(view, weights.ratio), 0.0)
        after = np.where(nonempty, weights.rows(view), 0.0)
        seen = np.where(nonempty, before, np.nan)  # an empty sample is past no bound
        below, above = (seen < lo).astype(np.float64), (seen > hi).astype(np.float64)
        truncate = options.tis_mode == "truncate"
        return {
            "mis_tis_weight_before_bound": before,
            "mis_tis_weight_after_bound": after,
            "mis_tis_fraction_a": above if truncate else below,
            "mis_tis_fraction_b": np.zeros(n.size) if truncate else above,
            "final_mean": after,
            "final_min": after,
            "final_max": after,
            "norm_token_sum": n * after,
            "norm_row_mean": after,
        }

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
                for name in (
                    "mis_rs_catastrophic_token_fraction",
                    "mis_rs_catastrophic_seq_fraction",
                ):
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
        return (SlimeAbsDiff(), SlimeMisPpl(), SlimeMisLogged(self), self.outcome())
