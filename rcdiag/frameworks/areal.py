"""inclusionAI AReaL: the decoupled-PPO behaviour statistics (metrics only).

Read on AReaL's main branch at commit 4aef98d (2026-05-21): ``areal/utils/functional/functional.py``
(``apply_rejection_sampling`` and ``ppo_actor_loss_fn``: behave_imp_weight = exp(proximal −
behaviour log-probs), zeroed where rejection sampling drops the token; behave_mask = weight > 0 on
the updated loss mask; behave_approx_kl = the log ratio there), ``areal/trainer/ppo/actor.py``
(``stats_tracker.stat(…, denominator="unclipped_behave_tokens")`` and ``rs_filtered_fraction``),
``areal/utils/stats_tracker.py`` (avg / min / max over the denominator's tokens, pooled over the
step's micro-batches) and ``areal/api/cli_args.py`` (``RejectionSamplingConfig``: level token,
action mask, metric ratio, upper 5.0, lower None). AReaL logs the statistics only with
``actor.rejection_sampling`` set (since April 2026 its default is None); rcdiag computes them at
that configuration's defaults, the old ``behave_imp_weight_cap`` 5.0 with token_mask.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import ClassVar

import numpy as np

from rcdiag.correction.engine import Component, Getter, Metrics, RowStats
from rcdiag.correction.view import TokenView
from rcdiag.frameworks.base import Framework, Pin, Source, prefixed, rho
from rcdiag.metrics.grouped import Kind

ID = "areal"
UPPER = 5.0
"""``RejectionSamplingConfig.upper``'s default: tokens with ρ above it are dropped."""
PIN = Pin("inclusionAI/AReaL", "main", "4aef98d8d818af55b43621aaadba047ae10f4e77", "2026-05-21")


@dataclass(frozen=True)
class ArealLogged(Component):
    """Over the kept tokens K (valid, 0 < ρ ≤ 5; ρ unclamped): ``behave_imp_weight/{avg,min,max}``
    of ρ and ``behave_approx_kl/{avg,min,max}`` of ℓ; ``rs_filtered_fraction`` is the share of
    valid tokens with ρ > 5."""

    upper: float = UPPER

    kinds: ClassVar[dict[str, Kind]] = {
        "kept": "sum",
        "rho_sum": "sum",
        "rho_min": "min",
        "rho_max": "max",
        "ell_sum": "sum",
        "ell_min": "min",
        "ell_max": "max",
    }

    def row_stats(self, view: TokenView) -> RowStats:
        ratio = rho(view)
        kept = view.mask & (ratio > 0) & (ratio <= self.upper)
        ell = view.log_ratio
        return {
            "kept": view.count(kept),
            "rho_sum": view.row_sum(np.where(kept, ratio, 0.0)),
            "rho_min": view.valid_min(np.where(kept, ratio, np.inf)),
            "rho_max": view.valid_max(np.where(kept, ratio, -np.inf)),
            "ell_sum": view.row_sum(np.where(kept, ell, 0.0)),
            "ell_min": view.valid_min(np.where(kept, ell, np.inf)),
            "ell_max": view.valid_max(np.where(kept, ell, -np.inf)),
        }

    def metrics(self, get: Getter) -> Metrics:
        kept = get("kept")

        def extreme(name: str) -> float | None:
            return None if kept == 0 else get(name)  # AReaL drops a statistic without tokens

        return prefixed(
            ID,
            {
                "behave_imp_weight/avg": get("rho_sum") / kept if kept else None,
                "behave_imp_weight/min": extreme("rho_min"),
                "behave_imp_weight/max": extreme("rho_max"),
                "behave_approx_kl/avg": get("ell_sum") / kept if kept else None,
                "behave_approx_kl/min": extreme("ell_min"),
                "behave_approx_kl/max": extreme("ell_max"),
                "rs_filtered_fraction": (get("valid_tokens") - kept) / get("valid_tokens"),
            },
        )


FRAMEWORK = Framework(
    id=ID,
    title="AReaL",
    sources=(
        Source(
            PIN.repo,
            "areal/utils/functional/functional.py",
            PIN.commit,
            "apply_rejection_sampling; ppo_actor_loss_fn: behave_imp_weight, behave_approx_kl, "
            "behave_mask",
        ),
        Source(
            PIN.repo,
            "areal/trainer/ppo/actor.py",
            PIN.commit,
            "stats_tracker.stat(behave_imp_weight, behave_approx_kl, "
            "denominator=unclipped_behave_tokens); rs_filtered_fraction",
        ),
        Source(
            PIN.repo,
            "areal/utils/stats_tracker.py",
            PIN.commit,
            "AVG_MIN_MAX: /avg, /min, /max over the denominator's tokens",
        ),
        Source(
            PIN.repo,
            "areal/api/cli_args.py",
            PIN.commit,
            "RejectionSamplingConfig defaults (token, mask, ratio, upper 5.0); rejection_sampling None",
        ),
    ),
    pin=PIN,
    metrics=(ArealLogged(),),
    aggregation=(
        "avg / min / max over the step's kept tokens (the stats tracker pools the micro-batches: "
        "exact); rs_filtered_fraction is a mean of per-micro-batch fractions (rcdiag: the step as "
        "one); logged only with actor.rejection_sampling set, here at its defaults (upper 5.0); "
        "AReaL's float32 ratio is 0 below ℓ ≈ −104 and drops such a token, rcdiag's float64 one "
        "only below ℓ ≈ −745"
    ),
)
