"""OpenRLHF: ``vllm_kl`` and the vLLM importance-sampling correction of its PPO actor.

Read from OpenRLHF's ``openrlhf/models/loss.py`` (``PolicyLoss.forward``: the three correction
types and ``vllm_kl``) and ``openrlhf/cli/train_ppo_ray.py`` (``--enable_vllm_is_correction``,
``--vllm_is_truncated_threshold`` default [0.5, 5.0], ``--vllm_is_correction_type`` default tis)
(docs/frameworks.md, "OpenRLHF").
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any, ClassVar

from rcdiag.correction.engine import Component, Getter, Metrics, RowStats
from rcdiag.correction.external import Band, ModePlan, Ratio, Weights
from rcdiag.correction.view import TokenView
from rcdiag.frameworks.base import Framework, Preset, Source, prefixed
from rcdiag.metrics.grouped import Kind

ID = "openrlhf"
LOW, HIGH = 0.5, 5.0
"""``--vllm_is_truncated_threshold`` defaults."""

SOURCES = (
    Source(
        "OpenRLHF/OpenRLHF",
        "openrlhf/models/loss.py",
        None,
        "PolicyLoss.forward: tis / icepop / seq-mask-tis weights; vllm_kl",
    ),
    Source(
        "OpenRLHF/OpenRLHF",
        "openrlhf/cli/train_ppo_ray.py",
        None,
        "--vllm_is_truncated_threshold [0.5, 5.0], --vllm_is_correction_type tis",
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
    return {
        "enable_vllm_is_correction": True,
        "vllm_is_correction_type": kind,
        "vllm_is_truncated_threshold": f"{LOW:g} {HIGH:g}",  # two values on the command line
    }


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
    metrics=(OpenrlhfLogged(),),
    aggregation=(
        "a token mean per micro-batch, averaged over micro-batches; rcdiag takes a step as one "
        "micro-batch"
    ),
    presets=PRESETS,
)
