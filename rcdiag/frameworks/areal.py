"""inclusionAI AReaL: the decoupled-PPO behaviour statistics (metrics only).

Read from inclusionAI/AReaL's PPO actor loss (``ppo_actor_loss_fn``: behave_imp_weight =
exp(proximal − behaviour log-probs), behave_approx_kl = their difference, zeroed outside the
behave mask) and the actor's ``stats_tracker.stat(…, denominator="unclipped_behave_tokens")``
(docs/frameworks.md, "AReaL"). With a ``behav_imp_weight_cap`` the denominator counts only the
tokens at or below the cap; rcdiag computes the uncapped statistics.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import ClassVar

from rcdiag.correction.engine import Component, Getter, Metrics, RowStats
from rcdiag.correction.view import TokenView
from rcdiag.frameworks.base import Framework, Source, prefixed, rho
from rcdiag.metrics.grouped import Kind

ID = "areal"


@dataclass(frozen=True)
class ArealLogged(Component):
    """``behave_imp_weight/avg`` (token mean of ρ, unclamped) and ``behave_approx_kl/avg`` (token
    mean of ℓ) over the step's valid tokens."""

    kinds: ClassVar[dict[str, Kind]] = {"rho": "sum"}

    def row_stats(self, view: TokenView) -> RowStats:
        return {"rho": view.row_sum(rho(view))}

    def metrics(self, get: Getter) -> Metrics:
        valid = get("valid_tokens")
        return prefixed(
            ID,
            {
                "behave_imp_weight/avg": get("rho") / valid,
                "behave_approx_kl/avg": get("log_ratio") / valid,
            },
        )


FRAMEWORK = Framework(
    id=ID,
    title="AReaL",
    sources=(
        Source(
            "inclusionAI/AReaL",
            "areal/utils/functional.py",
            None,
            "ppo_actor_loss_fn: behave_imp_weight, behave_approx_kl, behave_mask",
        ),
        Source(
            "inclusionAI/AReaL",
            "areal/engine/ppo/actor.py",
            None,
            "stats_tracker.stat(behave_imp_weight, behave_approx_kl, "
            "denominator=unclipped_behave_tokens)",
        ),
    ),
    metrics=(ArealLogged(),),
    aggregation="a token mean over the step's valid tokens (the stats tracker pools the step)",
)
