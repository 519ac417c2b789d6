"""NovaSky SkyRL: the policy forward pass's rollout/train log-prob difference (always) and the
off-policy correction's ratio statistics (with a correction on).

Read on SkyRL's main branch at commit a956457 (2026-08-21): ``skyrl/train/trainer.py`` (after the
policy forward pass over the whole training batch: ``policy/rollout_train_logprobs_abs_diff_{mean,
std,max,min}`` of |rollout − policy log-prob| over the loss mask), ``skyrl/backends/skyrl_train/
utils/off_policy_correction_utils.py`` (``compute_off_policy_correction``: is_ratio =
exp(clamp(old − rollout, ±20)); ``is_ratio_mean`` its masked mean, ``is_ratio_max`` the maximum of
ratio × mask) and ``skyrl/train/config/config.py`` (``OffPolicyCorrectionConfig``)
(docs/frameworks.md, "SkyRL"). ``is_ratio_std`` and ``is_ratio_min`` run over every padded position
(the zeros of padding included), which a dump does not record: not reproduced.
"""

from __future__ import annotations

import math
from dataclasses import dataclass
from typing import ClassVar

from rcdiag.correction.engine import Component, Getter, Metrics, RowStats, unbiased_std
from rcdiag.correction.view import TokenView
from rcdiag.frameworks.base import Framework, Pin, Source, abs_log_ratio, prefixed
from rcdiag.frameworks.skyrl_modes import PRESETS
from rcdiag.metrics.grouped import Kind
from rcdiag.metrics.token_sums import SAFETY_BOUND

ID = "skyrl"
PIN = Pin("NovaSky-AI/SkyRL", "main", "a9564572eb8e91076be43c1bd5e4615e3de17265", "2026-08-21")
DIFF = "policy/rollout_train_logprobs_abs_diff"


@dataclass(frozen=True)
class SkyrlAbsDiff(Component):
    """``policy/rollout_train_logprobs_abs_diff_{mean,std,max,min}``: mean, sample standard
    deviation (N − 1), maximum and minimum of |ℓ| over the step's valid tokens."""

    kinds: ClassVar[dict[str, Kind]] = {"abs_moments": "moments", "abs_min": "min"}

    def row_stats(self, view: TokenView) -> RowStats:
        values = abs_log_ratio(view)
        return {"abs_moments": view.token_moments(values), "abs_min": view.valid_min(values)}

    def metrics(self, get: Getter) -> Metrics:
        return prefixed(
            ID,
            {
                f"{DIFF}_mean": get("abs_log_ratio") / get("valid_tokens"),
                f"{DIFF}_std": unbiased_std(get("abs_moments.n"), get("abs_moments.m2")),
                f"{DIFF}_max": get("abs_log_ratio_max"),
                f"{DIFF}_min": get("abs_min"),
            },
        )


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
            PIN.repo,
            "skyrl/train/trainer.py",
            PIN.commit,
            "policy/rollout_train_logprobs_abs_diff_{mean,std,max,min} over the training batch",
        ),
        Source(
            PIN.repo,
            "skyrl/backends/skyrl_train/utils/off_policy_correction_utils.py",
            PIN.commit,
            "compute_off_policy_correction: is_ratio_mean, is_ratio_max; TIS, sequence masks, "
            "outlier-token and token masks",
        ),
        Source(
            PIN.repo,
            "skyrl/train/config/config.py",
            PIN.commit,
            "OffPolicyCorrectionConfig: keys and defaults",
        ),
    ),
    pin=PIN,
    metrics=(SkyrlAbsDiff(), SkyrlLogged()),
    presets=PRESETS,
    aggregation=(
        "policy/rollout_train_logprobs_abs_diff_*: the whole training batch of the step, exact; "
        "is_ratio_mean / is_ratio_max: per micro-batch, logged only with a correction on (rcdiag "
        "takes a step as one micro-batch)"
    ),
)
