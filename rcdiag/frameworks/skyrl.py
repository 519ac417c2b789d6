"""NovaSky SkyRL: the off-policy-correction ratio statistics (metrics only).

Read from SkyRL's ``compute_off_policy_correction`` (``skyrl_train/utils/ppo_utils.py``): is_ratio =
exp(clamp(old − rollout, ±20)); ``is_ratio_mean`` is its masked mean and ``is_ratio_max`` the maximum
of ratio × mask (docs/frameworks.md, "SkyRL"). ``is_ratio_std`` and ``is_ratio_min`` run over every
padded position (the zeros of padding included), which a dump does not record: not reproduced.
"""

from __future__ import annotations

import math
from dataclasses import dataclass
from typing import ClassVar

from rcdiag.correction.engine import Component, Getter, Metrics, RowStats
from rcdiag.correction.view import TokenView
from rcdiag.frameworks.base import Framework, Source, prefixed
from rcdiag.metrics.grouped import Kind
from rcdiag.metrics.offpolicy import SAFETY_BOUND

ID = "skyrl"


@dataclass(frozen=True)
class SkyrlLogged(Component):
    """``is_ratio_mean`` (token mean of exp(clamp ℓ)) and ``is_ratio_max``."""

    kinds: ClassVar[dict[str, Kind]] = {"log_ratio_max": "max"}

    def row_stats(self, view: TokenView) -> RowStats:
        return {"log_ratio_max": view.valid_max(view.log_ratio)}

    def metrics(self, get: Getter) -> Metrics:
        top = min(max(get("log_ratio_max"), -SAFETY_BOUND), SAFETY_BOUND)
        return prefixed(
            ID,
            {
                "is_ratio_mean": get("token_weight") / get("valid_tokens"),
                "is_ratio_max": math.exp(top),
            },
        )


FRAMEWORK = Framework(
    id=ID,
    title="SkyRL",
    sources=(
        Source(
            "NovaSky-AI/SkyRL",
            "skyrl-train/skyrl_train/utils/ppo_utils.py",
            None,
            "compute_off_policy_correction: is_ratio_mean, is_ratio_max",
        ),
    ),
    metrics=(SkyrlLogged(),),
    aggregation="per micro-batch; rcdiag takes a step as one micro-batch",
)
