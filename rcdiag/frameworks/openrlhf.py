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
from rcdiag.correction.external import Band, Ratio, Weights, ratio_rows
from rcdiag.correction.modes import ModePlan
from rcdiag.correction.view import TokenView
from rcdiag.frameworks.base import Framework, Pin, Preset, Source, prefixed, rho
from rcdiag.metrics.grouped import Kind
from rcdiag.metrics.ragged import F64

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


EPS = 1e-6
"""PolicyLoss clamps both probabilities to [1e-6, 1 − 1e-6] before a divergence."""


def divergence(view: TokenView, gating: str) -> np.ndarray:
    """The sampled token's binary KL p·ln(p/q) + (1−p)·ln((1−p)/(1−q)) or TV |p − q|, with p the
    rollout and q the training probability (valid positions; 0 elsewhere)."""

    def compute() -> np.ndarray:
        p = np.clip(np.exp(view.valid(view.rollout)), EPS, 1 - EPS)
        q = np.clip(np.exp(view.valid(view.old)), EPS, 1 - EPS)
        if gating == "tv":
            return view.valid(np.abs(p - q))
        return view.valid(p * np.log(p / q) + (1 - p) * np.log((1 - p) / (1 - q)))

    return view.memo(("openrlhf_divergence", gating), compute)


def gate_keep(view: TokenView, seq_level: bool, gating: str, low: float, high: float) -> np.ndarray:
    """Per row (seq level) or per position: the gated statistic lies in [low, high] (the ratio
    itself, its row geometric mean, a divergence or its row mean; an empty row's mean is 0)."""

    def compute() -> np.ndarray:
        if gating == "ratio":
            stat = ratio_rows(view, Ratio("geometric")) if seq_level else rho(view)
        else:
            d = divergence(view, gating)
            stat = view.row_sum(d) / np.maximum(view.n, 1.0) if seq_level else d
        return (stat >= low) & (stat <= high)

    return view.memo(("openrlhf_gate", seq_level, gating, low, high), compute)


@dataclass(frozen=True)
class GateWeights(Weights):
    """A divergence gate's weights: ρ where the gate keeps the token (or its row), else 0."""

    seq_level: bool = False
    gating: str = "binary_kl"

    def applied(self, view: TokenView) -> F64:
        def compute() -> F64:
            keep = gate_keep(view, self.seq_level, self.gating, self.lo, self.hi)
            keep = view.broadcast(keep) if self.seq_level else keep
            return np.where(keep, rho(view), 0.0)

        return view.memo(("openrlhf_gate_weights", self), compute)


@dataclass(frozen=True)
class OpenrlhfFilter(Component):
    """``is_filter_ratio``: the share of valid tokens whose statistic leaves [low, high] (token
    level), or of rows whose row statistic does (seq level: over every row of the batch)."""

    seq_level: bool
    low: float = LOW
    high: float = HIGH
    gating: str = "ratio"

    kinds: ClassVar[dict[str, Kind]] = {"filtered": "sum"}

    def row_stats(self, view: TokenView) -> RowStats:
        keep = gate_keep(view, self.seq_level, self.gating, self.low, self.high)
        if self.seq_level:
            return {"filtered": (~keep).astype(np.float64)}
        return {"filtered": view.count(~keep)}

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
    """A gate: a weight on the loss (zero weights do not change the action mask)."""

    seq_level: bool = False
    low: float = LOW
    high: float = HIGH
    gating: str = "ratio"

    def components(self) -> tuple[Component, ...]:
        return (
            OpenrlhfLogged(),
            OpenrlhfFilter(self.seq_level, self.low, self.high, self.gating),
            self.outcome(),
        )


def plan(
    level: str, mode: str, low: float = LOW, high: float = HIGH, gating: str = "ratio"
) -> OpenrlhfPlan:
    seq = level == "seq"
    if gating == "ratio":
        w: Weights = weights(level, mode, low, high)
    else:
        w = GateWeights(Ratio("token"), lo=low, hi=high, seq_level=seq, gating=gating)
    return OpenrlhfPlan(ID, w, seq_level=seq, low=low, high=high, gating=gating)


def config(
    level: str, mode: str, low: float = LOW, high: float = HIGH, gating: str = "ratio"
) -> dict[str, Any]:
    """The train_ppo_ray options of a gate."""
    return {LEVEL: level, MODE: mode, GATING: gating, THRESHOLD: (low, high)}


MODES = {
    "tis": ("token", "clip", "token ratio clamped to [0.5, 5] (TIS)"),
    "icepop": ("token", "mask", "token ratio set to 0 outside [0.5, 5] (IcePop)"),
    "seq-mask-tis": (
        "seq",
        "mask",
        "token ratio, zeroed on rows whose geometric-mean ratio leaves [0.5, 5]",
    ),
}

GATES = {
    "seq-binary-kl": (
        "seq",
        "binary_kl",
        3e-3,
        "token ratio, zeroed on rows whose mean binary KL exceeds 3e-3 (FlashREINFORCE; the "
        "value of OpenRLHF's own test)",
    ),
    "token-tv": (
        "token",
        "tv",
        0.05,
        "token ratio, zeroed where |p_rollout − p_train| exceeds 0.05 (OpenRLHF's test value)",
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
) + tuple(
    Preset(
        f"{ID}:{name}",
        purpose,
        config(level, "mask", 0.0, delta, gating),
        plan(level, "mask", 0.0, delta, gating),
        "own components (probabilities clamped to [1e-6, 1 − 1e-6], as OpenRLHF)",
    )
    for name, (level, gating, delta, purpose) in GATES.items()
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
