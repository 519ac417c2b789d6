"""OpenRLHF: ``vllm_kl``, ``is_filter_ratio`` and the train/rollout importance-sampling correction of
its PPO actor.

Read from OpenRLHF's release 0.11.2 (the PyPI wheel, built 2026-09-14; newer than the mirrored head
of its main branch, 3c3be62 of 2026-08-13, whose ``--algo.advantage.is_correction_enable`` /
``_type`` flags 0.11.2 replaced): ``openrlhf/models/loss.py`` (``PolicyLoss``: the gate on the
ratio per token or per sequence, mask or clip, ``vllm_kl`` and ``is_filter_ratio``),
``openrlhf/cli/train_ppo_ray.py`` (``--algo.advantage.is_correction_level`` off / token / seq,
``_mode`` mask / clip, ``_gating`` ratio / binary_kl / tv, ``_threshold`` default 0.5 5.0) and
``openrlhf/trainer/ray/ppo_actor.py`` (docs/frameworks.md, "OpenRLHF").
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any, ClassVar

import numpy as np

from rcdiag.correction.engine import Component, Getter, Metrics, RowStats
from rcdiag.correction.external import Band, ModePlan, Ratio, Weights, ratio_rows
from rcdiag.correction.view import TokenView
from rcdiag.frameworks.base import Framework, Pin, Preset, Source, prefixed, rho
from rcdiag.metrics.grouped import Kind

ID = "openrlhf"
LOW, HIGH = 0.5, 5.0
"""``--algo.advantage.is_correction_threshold`` defaults."""
PIN = Pin("OpenRLHF/OpenRLHF", "main", "openrlhf==0.11.2", "2026-09-14", release="0.11.2")
LEVEL = "algo.advantage.is_correction_level"
MODE = "algo.advantage.is_correction_mode"
GATING = "algo.advantage.is_correction_gating"
THRESHOLD = "algo.advantage.is_correction_threshold"
"""The option names (``--`` + name on the command line; argparse keeps the dots in its dest)."""

SOURCES = (
    Source(
        PIN.repo,
        "openrlhf/models/loss.py",
        PIN.commit,
        "PolicyLoss.forward: the ratio gate per token / sequence, mask / clip; vllm_kl and "
        "is_filter_ratio (PPO loss only)",
    ),
    Source(
        PIN.repo,
        "openrlhf/cli/train_ppo_ray.py",
        PIN.commit,
        f"--{LEVEL} (off), --{MODE} (mask), --{GATING} (ratio), --{THRESHOLD} [0.5, 5.0]",
    ),
    Source(
        PIN.repo,
        "openrlhf/trainer/ray/ppo_actor.py",
        PIN.commit,
        "vllm_kl and is_filter_ratio into the step's info: a mean of per-micro-batch values",
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


@dataclass(frozen=True)
class OpenrlhfFilter(Component):
    """``is_filter_ratio``: the share of valid tokens whose ratio leaves [low, high] (token level),
    or of rows whose geometric-mean ratio does (seq level; an empty row's is e⁰ = 1)."""

    seq_level: bool
    low: float = LOW
    high: float = HIGH

    kinds: ClassVar[dict[str, Kind]] = {"filtered": "sum"}

    def row_stats(self, view: TokenView) -> RowStats:
        if self.seq_level:
            rows = ratio_rows(view, Ratio("geometric"))
            return {"filtered": ((rows < self.low) | (rows > self.high)).astype(np.float64)}
        r = rho(view)
        return {"filtered": view.count((r < self.low) | (r > self.high))}

    def metrics(self, get: Getter) -> Metrics:
        total = get("rows") if self.seq_level else get("valid_tokens")
        return prefixed(ID, {"is_filter_ratio": get("filtered") / total})


def weights(level: str, mode: str, low: float = LOW, high: float = HIGH) -> Weights:
    """token clip: clamp(ρ, low, high); token mask: ρ inside [low, high], else 0; seq mask: ρ, set
    to 0 on rows whose geometric-mean ratio exp(mean ℓ) leaves [low, high] (ρ unclamped)."""
    token = Ratio("token")
    if mode == "clip":
        return Weights(token, "clip", lo=low, hi=high)
    gate = token if level == "token" else Ratio("geometric")
    return Weights(token, zero=(Band(gate, low, high),))


@dataclass(frozen=True)
class OpenrlhfPlan(ModePlan):
    """A ratio gate: a weight on the loss (zero weights do not change the action mask)."""

    seq_level: bool = False
    low: float = LOW
    high: float = HIGH

    def components(self) -> tuple[Component, ...]:
        return (
            OpenrlhfLogged(),
            OpenrlhfFilter(self.seq_level, self.low, self.high),
            self.outcome(),
        )


def plan(level: str, mode: str, low: float = LOW, high: float = HIGH) -> OpenrlhfPlan:
    return OpenrlhfPlan(
        ID, weights(level, mode, low, high), seq_level=level == "seq", low=low, high=high
    )


def config(level: str, mode: str, low: float = LOW, high: float = HIGH) -> dict[str, Any]:
    """The train_ppo_ray options of a gate on the ratio."""
    return {LEVEL: level, MODE: mode, GATING: "ratio", THRESHOLD: (low, high)}


MODES = {
    "tis": ("token", "clip", "token ratio clamped to [0.5, 5] (TIS)"),
    "icepop": ("token", "mask", "token ratio set to 0 outside [0.5, 5] (IcePop)"),
    "seq-mask-tis": (
        "seq",
        "mask",
        "token ratio, zeroed on rows whose geometric-mean ratio leaves [0.5, 5]",
    ),
}

PRESETS = tuple(
    Preset(
        f"{ID}:{name}",
        purpose,
        config(level, mode),
        plan(level, mode),
        "own components (OpenRLHF exponentiates ℓ unclamped)",
    )
    for name, (level, mode, purpose) in MODES.items()
)

FRAMEWORK = Framework(
    id=ID,
    title="OpenRLHF",
    sources=SOURCES,
    pin=PIN,
    metrics=(OpenrlhfLogged(),),
    aggregation=(
        "a token mean per micro-batch, averaged over micro-batches (logged with a correction on); "
        "rcdiag takes a step as one micro-batch"
    ),
    presets=PRESETS,
)
