"""OpenRLHF: ``vllm_kl`` and the vLLM importance-sampling correction of its PPO actor.

Read on OpenRLHF's main branch at commit 3c3be62 (2026-08-13): ``openrlhf/models/loss.py``
(``PolicyLoss.forward``: the three correction types and ``vllm_kl``) and
``openrlhf/cli/train_ppo_ray.py`` (``--algo.advantage.is_correction_enable``,
``--algo.advantage.is_correction_threshold`` default [0.5, 5.0],
``--algo.advantage.is_correction_type`` default tis; renamed from ``--enable_vllm_is_correction``,
``--vllm_is_truncated_threshold``, ``--vllm_is_correction_type`` in April 2026)
(docs/frameworks.md, "OpenRLHF").
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any, ClassVar

from rcdiag.correction.engine import Component, Getter, Metrics, RowStats
from rcdiag.correction.external import Band, ModePlan, Ratio, Weights
from rcdiag.correction.view import TokenView
from rcdiag.frameworks.base import Framework, Pin, Preset, Source, prefixed
from rcdiag.metrics.grouped import Kind

ID = "openrlhf"
LOW, HIGH = 0.5, 5.0
"""``--algo.advantage.is_correction_threshold`` defaults."""
PIN = Pin("OpenRLHF/OpenRLHF", "main", "3c3be6234e0cb353e76bb8019947db9dfe99fca7", "2026-08-13")
ENABLE = "algo.advantage.is_correction_enable"
TYPE = "algo.advantage.is_correction_type"
THRESHOLD = "algo.advantage.is_correction_threshold"
"""The option names (``--`` + name on the command line; argparse keeps the dots in its dest)."""

SOURCES = (
    Source(
        PIN.repo,
        "openrlhf/models/loss.py",
        PIN.commit,
        "PolicyLoss.forward: tis / icepop / seq-mask-tis weights; vllm_kl (PPO loss only)",
    ),
    Source(
        PIN.repo,
        "openrlhf/cli/train_ppo_ray.py",
        PIN.commit,
        f"--{ENABLE}, --{THRESHOLD} [0.5, 5.0], --{TYPE} tis",
    ),
    Source(
        PIN.repo,
        "openrlhf/trainer/ray/ppo_actor.py",
        PIN.commit,
        "vllm_kl into the step's info: a mean of per-micro-batch token means",
    ),
)


@dataclass(frozen=True)
class OpenrlhfLogged(Component):
    """``vllm_kl``: the token mean of log π_rollout − log π_train (= verl's kl)."""

    kinds: ClassVar[dict[str, Kind]] = {}

    def row_stats(self, view: TokenView) -> RowStats:
        return {}

    def metrics(self, get: Getter) -> Metrics:
        return prefixed(ID, {"vllm_kl": -get("log_ratio") / get("valid_tokens")})


def weights(kind: str, low: float = LOW, high: float = HIGH) -> Weights:
    """tis: clamp(ρ, low, high); icepop: ρ inside [low, high], else 0; seq-mask-tis: ρ, set to 0
    on rows whose geometric-mean ratio exp(mean ℓ) leaves [low, high] (ρ unclamped throughout)."""
    token = Ratio("token")
    if kind == "tis":
        return Weights(token, "clip", lo=low, hi=high)
    if kind == "icepop":
        return Weights(token, zero=(Band(token, low, high),))
    return Weights(token, zero=(Band(Ratio("geometric"), low, high),))


@dataclass(frozen=True)
class OpenrlhfPlan(ModePlan):
    """A correction type: a weight on the loss (zero weights do not change the action mask)."""

    def components(self) -> tuple[Component, ...]:
        return (OpenrlhfLogged(), self.outcome())


def config(kind: str) -> dict[str, Any]:
    return {ENABLE: True, TYPE: kind, THRESHOLD: (LOW, HIGH)}


PURPOSES = {
    "tis": "token ratio clamped to [0.5, 5]",
    "icepop": "token ratio set to 0 outside [0.5, 5]",
    "seq-mask-tis": "token ratio, zeroed on rows whose geometric-mean ratio leaves [0.5, 5]",
}

PRESETS = tuple(
    Preset(
        f"{ID}:{kind}",
        purpose,
        config(kind),
        OpenrlhfPlan(ID, weights(kind)),
        "own components (OpenRLHF exponentiates ℓ unclamped)",
    )
    for kind, purpose in PURPOSES.items()
)

FRAMEWORK = Framework(
    id=ID,
    title="OpenRLHF",
    sources=SOURCES,
    pin=PIN,
    metrics=(OpenrlhfLogged(),),
    aggregation=(
        "a token mean per micro-batch, averaged over micro-batches; rcdiag takes a step as one "
        "micro-batch"
    ),
    presets=PRESETS,
)
