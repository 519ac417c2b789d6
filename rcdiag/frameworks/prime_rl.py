"""PrimeIntellect prime-rl: ``mismatch_kl/all/{mean,std,max}`` (metrics only).

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
from rcdiag.correction.view import TokenView
from rcdiag.frameworks.base import Framework, Pin, Source, prefixed
from rcdiag.metrics.grouped import Kind

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
    aggregation=(
        "every valid token of the step (all micro-batches and ranks gathered): exact; tokens of "
        "frozen-model (ce) components are left out there, and are not in a dump"
    ),
    aliases=("prime-rl", "primerl"),
)
