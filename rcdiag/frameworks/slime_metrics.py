"""slime's logged mismatch metrics (docs/frameworks.md, "slime"): ``train_rollout_logprob_abs_diff``
(always) and the MIS helper's perplexity metrics (only with the helper), each a per-sample mean
averaged over the step's samples; and the metrics of its built-in TIS and IcePop."""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass
from typing import ClassVar

import numpy as np

from rcdiag.correction.engine import Component, Getter, Metrics, RowStats
from rcdiag.correction.external import Ratio, Weights, ratio_tokens
from rcdiag.correction.view import TokenView
from rcdiag.frameworks.base import abs_log_ratio, prefixed, rho
from rcdiag.metrics.grouped import Kind
from rcdiag.metrics.offpolicy import count_divisor
from rcdiag.metrics.ragged import F64

ID = "slime"
SAFETY_BOUND = 20.0
"""mis.py clamps every log ratio to ±20 before exponentiating it."""

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
class SlimeAbsDiff(Component):
    """``train_rollout_logprob_abs_diff``, logged on every step with rollout log-probs: the
    per-sample mean of |ℓ| (0 for a sample without valid tokens), summed over the samples and
    divided by the step's sample count B."""

    kinds: ClassVar[dict[str, Kind]] = {"abs_row_mean": "sum"}

    def row_stats(self, view: TokenView) -> RowStats:
        return {"abs_row_mean": view.row_mean(abs_log_ratio(view))}

    def metrics(self, get: Getter) -> Metrics:
        return prefixed(ID, {"train_rollout_logprob_abs_diff": get("abs_row_mean") / get("rows")})


@dataclass(frozen=True)
class SlimeMisPpl(Component):
    """The MIS helper's perplexity metrics (``add_ppl_metrics`` of mis.py, logged only with the
    helper as the custom TIS function), each a per-sample mean over the sample's valid tokens,
    summed over the samples and divided by B."""

    kinds: ClassVar[dict[str, Kind]] = {"k3_row_mean": "sum", "chi2_row": "sum"}

    def row_stats(self, view: TokenView) -> RowStats:
        """Per sample the mean of k3 = e^ℓ − 1 − ℓ and of w² with w = e^clamp(ℓ, ±20): the
        analysis's Σk3 and Σw² when the view holds them (the same sums), else summed here."""
        ell, divisor = view.log_ratio, count_divisor(view.n)
        if "k3" in view.row_sums and "token_weight_sq" in view.row_sums:
            k3, second = view.row_sums["k3"], view.row_sums["token_weight_sq"] / divisor
        else:
            w = ratio_tokens(view, Ratio("token", SAFETY_BOUND))
            k3, second = view.row_sum(np.expm1(ell) - ell), view.row_mean(view.squares(w))
        return {
            "k3_row_mean": k3 / divisor,
            "chi2_row": np.where(view.nonempty, second - 1.0, 0.0),
        }

    def metrics(self, get: Getter) -> Metrics:
        rows = get("rows")
        empty = rows - get("nonempty_rows")  # an empty sample adds 0, where verl's mean adds e^0
        return prefixed(
            ID,
            {
                "mis_training_log_ppl": get("training_log_ppl") / rows,
                "mis_training_ppl": (get("training_ppl") - empty) / rows,
                "mis_rollout_log_ppl": get("rollout_log_ppl") / rows,
                "mis_rollout_ppl": (get("rollout_ppl") - empty) / rows,
                # per sample the mean of log π_rollout − log π_train: the same sum as log_ppl_diff
                "mis_kl": get("log_ppl_diff") / rows,
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


def _flag_share(view: TokenView, flags: np.ndarray) -> F64:
    """Each sample's share of valid tokens where ``flags`` holds: the per-sample mean of the flag
    as 0.0/1.0, counted without a float copy of the tokens (the counts are exact either way)."""
    return view.count(flags) / count_divisor(view.n)


def _share_above(view: TokenView, values: F64, bound: float) -> F64:
    """Each sample's share of valid tokens whose value is > ``bound`` (:func:`_flag_share` of
    ``values > bound``, without a pass over the tokens when no sample's largest passes it)."""
    return view.count_above(values, bound) / count_divisor(view.n)


def _share_below(view: TokenView, values: F64, bound: float) -> F64:
    """Each sample's share of valid tokens whose value is < ``bound`` (as :func:`_share_above`)."""
    return view.count_below(values, bound) / count_divisor(view.n)


@dataclass(frozen=True)
class SlimeTisLogged(Component):
    """``tis``, ``tis_clipfrac``, ``tis_abs`` of the built-in TIS or of ``icepop_function``: per
    sample the mean of ρ (unclamped), of [W ≠ ρ] and of |ρ − 1|, then the mean over samples."""

    weights: Weights
    names: ClassVar[tuple[str, ...]] = ("tis", "tis_clipfrac", "tis_abs")
    kinds: ClassVar[dict[str, Kind]] = dict.fromkeys(names, "sum")

    def row_stats(self, view: TokenView) -> RowStats:
        ratio = rho(view)
        # |ρ − 1|, shared by both of slime's modes
        deviation = view.memo(("rho_deviation",), lambda: view.valid(np.abs(ratio - 1.0)))
        means = _sample_means(view, {"tis": ratio, "tis_abs": deviation})
        if self.weights.ratio == Ratio("token") and self.weights.keeps_every_ratio(view):
            return {**means, "tis_clipfrac": np.zeros(view.batch.rows)}  # W = ρ everywhere
        return {**means, "tis_clipfrac": _flag_share(view, self.weights.applied(view) != ratio)}

    def metrics(self, get: Getter) -> Metrics:
        rows = get("rows")
        return prefixed(ID, {name: get(name) / rows for name in self.names})
