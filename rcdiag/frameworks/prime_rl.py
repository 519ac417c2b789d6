"""PrimeIntellect prime-rl: ``mismatch_kl/all/{mean,std,max}``, and the IPO loss's trust region.

Read on prime-rl's main branch at commit 559b447 (2026-08-21): ``src/prime_rl/trainer/rl/loss.py``
(``compute_importance_ratio_and_mismatch_kl``: log ratio trainer − inference, mismatch KL
e^ℓ − ℓ − 1), ``src/prime_rl/trainer/rl/train.py`` (the per-token values of every micro-batch and
rank gathered under ``mismatch_kl/all``), ``src/prime_rl/trainer/utils.py`` (``Tensors.compute_stats``:
mean, median, sample std, min, max of the gathered tokens; ``filter_rl_trainer_tensor_stats_for_wandb``
keeps mean and max, and std of the ``/all`` key) (docs/frameworks.md, "prime-rl").
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import ClassVar

import numpy as np

from rcdiag.correction.engine import Component, Getter, Metrics, RowStats, unbiased_std
from rcdiag.correction.external import Ratio, TokenRule, Weights
from rcdiag.correction.modes import ModePlan
from rcdiag.correction.view import TokenView
from rcdiag.frameworks.base import Framework, Pin, Preset, Source, prefixed
from rcdiag.metrics.grouped import Kind
from rcdiag.metrics.ragged import Bool

ID = "prime_rl"
PIN = Pin(
    "PrimeIntellect-ai/prime-rl", "main", "559b44772e471d1538537b8805cc77f3824a5e64", "2026-08-21"
)


def mismatch_kl(view: TokenView) -> np.ndarray:
    """e^ℓ − ℓ − 1 on every position (0 where invalid, where ℓ is 0)."""
    return view.memo(("prime_mismatch_kl",), lambda: np.expm1(view.log_ratio) - view.log_ratio)


@dataclass(frozen=True)
class PrimeLogged(Component):
    """``mismatch_kl/all/mean``, ``/std`` (N − 1) and ``/max`` of e^ℓ − ℓ − 1 (unclamped; its mean
    is verl's k3_kl) over every valid token of the step."""

    kinds: ClassVar[dict[str, Kind]] = {"kl_moments": "moments", "kl_max": "max"}

    def row_stats(self, view: TokenView) -> RowStats:
        with np.errstate(over="ignore", invalid="ignore"):
            values = mismatch_kl(view)
            return {"kl_moments": view.token_moments(values), "kl_max": view.valid_max(values)}

    def metrics(self, get: Getter) -> Metrics:
        return prefixed(
            ID,
            {
                "mismatch_kl/all/mean": get("k3") / get("valid_tokens"),
                "mismatch_kl/all/std": unbiased_std(get("kl_moments.n"), get("kl_moments.m2")),
                "mismatch_kl/all/max": get("kl_max"),
            },
        )


IPO_THRESHOLD = 0.1
"""``IPOLossConfig.ipo_threshold``'s default (prime-rl-configs' trainer.py)."""


def prob_diff(view: TokenView) -> np.ndarray:
    """|e^(log π_train) − e^(log π_rollout)| on valid tokens (0 elsewhere)."""
    return view.memo(
        ("prime_prob_diff",),
        lambda: view.valid(np.abs(np.exp(view.old) - np.exp(view.valid(view.rollout)))),
    )


@dataclass(frozen=True)
class ProbDiffBand(TokenRule):
    """ipo_loss_fn's trust region: a token with |p_train − p_rollout| above the threshold leaves the
    policy-gradient term (``is_masked``)."""

    threshold: float

    def inside(self, view: TokenView) -> Bool:
        return view.memo(
            ("prime_ipo", self.threshold),
            lambda: view.or_invalid(prob_diff(view) <= self.threshold),
        )


@dataclass(frozen=True)
class PrimeIpoLogged(Component):
    """ipo_loss_fn's metrics, each per micro-batch (rcdiag: the step as one) and logged as
    ``<name>/mean``: ``is_masked`` (share of valid tokens masked), ``masked_mismatch_kl`` and
    ``unmasked_mismatch_kl`` (mean of e^ℓ − ℓ − 1 over the masked / kept tokens; 0 without one)."""

    threshold: float = IPO_THRESHOLD

    kinds: ClassVar[dict[str, Kind]] = {
        "ipo_masked": "sum",
        "ipo_masked_kl": "sum",
        "ipo_kept_kl": "sum",
    }

    def row_stats(self, view: TokenView) -> RowStats:
        masked = view.mask & ~ProbDiffBand(self.threshold).inside(view)
        with np.errstate(over="ignore", invalid="ignore"):
            kl = mismatch_kl(view)
            return {
                "ipo_masked": view.count(masked),
                "ipo_masked_kl": view.row_sum(np.where(masked, kl, 0.0)),
                "ipo_kept_kl": view.row_sum(np.where(masked, 0.0, kl)),
            }

    def metrics(self, get: Getter) -> Metrics:
        masked, valid = get("ipo_masked"), get("valid_tokens")
        return prefixed(
            ID,
            {
                "is_masked/mean": masked / valid,
                "masked_mismatch_kl/mean": get("ipo_masked_kl") / max(masked, 1.0),
                "unmasked_mismatch_kl/mean": get("ipo_kept_kl") / max(valid - masked, 1.0),
            },
        )


@dataclass(frozen=True)
class PrimeIpoPlan(ModePlan):
    threshold: float = IPO_THRESHOLD

    def components(self) -> tuple[Component, ...]:
        return (PrimeLogged(), PrimeIpoLogged(self.threshold), self.outcome())


def ipo_plan(threshold: float = IPO_THRESHOLD) -> PrimeIpoPlan:
    """The importance ratio ρ (unclamped) on the kept tokens, |Δp| > threshold rejected."""
    return PrimeIpoPlan(
        ID, Weights(Ratio("token")), (ProbDiffBand(threshold),), threshold=threshold
    )


PRESETS = (
    Preset(
        f"{ID}:ipo",
        "tokens with |p_train − p_rollout| > 0.1 leave the policy gradient (loss type ipo)",
        {"trainer.loss.type": "ipo", "trainer.loss.ipo_threshold": IPO_THRESHOLD},
        ipo_plan(),
        "own components (ρ unclamped)",
    ),
)

FRAMEWORK = Framework(
    id=ID,
    title="prime-rl",
    sources=(
        Source(
            PIN.repo,
            "src/prime_rl/trainer/rl/loss.py",
            PIN.commit,
            "mismatch_kl = exp(log ratio) − log ratio − 1; ipo_loss_fn's |Δp| trust region",
        ),
        Source(
            PIN.repo,
            "packages/prime-rl-configs/src/prime_rl/configs/trainer.py",
            PIN.commit,
            "IPOLossConfig: type ipo, ipo_threshold 0.1",
        ),
        Source(
            PIN.repo,
            "src/prime_rl/trainer/rl/train.py",
            PIN.commit,
            "mismatch_kl/all: the tokens of every micro-batch under the loss mask",
        ),
        Source(
            PIN.repo,
            "src/prime_rl/trainer/utils.py",
            PIN.commit,
            "Tensors.compute_stats: mean / std / max over all gathered tokens",
        ),
    ),
    pin=PIN,
    metrics=(PrimeLogged(),),
    presets=PRESETS,
    aggregation=(
        "every valid token of the step (all micro-batches and ranks gathered): exact; tokens of "
        "frozen-model (ce) components are left out there, and are not in a dump"
    ),
    aliases=("prime-rl", "primerl"),
)
