"""THUDM slime: ``train_rollout_logprob_abs_diff``, the built-in TIS and IcePop, and the MIS helper.

Read from THUDM/slime ``slime/backends/megatron_utils/loss.py`` (commit 00c2d6d: the metric,
``vanilla_tis_function``, ``icepop_function``), ``slime/backends/megatron_utils/cp_utils.py``
(``get_sum_of_sample_mean``: a mean per sample, summed, divided by the step's sample count) and
``examples/train_infer_mismatch_helper/mis.py`` / ``mis.yaml`` (commit cfab168; the veto from the
version before it). docs/frameworks.md, "slime".
"""

from __future__ import annotations

from dataclasses import dataclass

from rcdiag.correction.engine import Component
from rcdiag.correction.external import Band, ModePlan, Ratio, Weights
from rcdiag.frameworks.base import Framework, Preset, Source
from rcdiag.frameworks.slime_metrics import ID, SlimeLogged, SlimeTisLogged
from rcdiag.frameworks.slime_mis import Mis, SlimeMisPlan, mis_plan

__all__ = ["Mis", "SlimeMisPlan", "icepop_plan", "mis_plan", "tis_plan"]


SOURCES = (
    Source(
        "THUDM/slime",
        "slime/backends/megatron_utils/loss.py",
        "00c2d6db0f23a4900be6e80a8eb81eebf9e1ebff",
        "train_rollout_logprob_abs_diff; vanilla_tis_function; icepop_function",
    ),
    Source(
        "THUDM/slime",
        "slime/backends/megatron_utils/cp_utils.py",
        None,
        "get_sum_of_sample_mean: per-sample masked mean (divisor max(n, 1)), summed",
    ),
    Source(
        "THUDM/slime",
        "examples/train_infer_mismatch_helper/mis.py",
        "cfab168702b8ed7fd5e15e5edca7520a5f5a920c",
        "compute_mis_weights: tis_level/tis_mode/bounds, use_rs, trust region, batch normalisation",
    ),
    Source(
        "THUDM/slime",
        "examples/train_infer_mismatch_helper/mis.yaml",
        "cfab168702b8ed7fd5e15e5edca7520a5f5a920c",
        "the helper's example configuration (the MIS preset's defaults)",
    ),
)


@dataclass(frozen=True)
class SlimeTisPlan(ModePlan):
    def components(self) -> tuple[Component, ...]:
        assert self.weights is not None
        return (SlimeLogged(), SlimeTisLogged(self.weights), self.outcome())


TIS_CLIP, TIS_CLIP_LOW = 2.0, 0.0
"""``--tis-clip`` and ``--tis-clip-low`` defaults."""


def tis_plan(low: float = TIS_CLIP_LOW, high: float = TIS_CLIP) -> SlimeTisPlan:
    """``--use-tis``: W = clamp(ρ, low, high), ρ unclamped."""
    return SlimeTisPlan(ID, Weights(Ratio("token"), "clip", lo=low, hi=high))


def icepop_plan(low: float = TIS_CLIP_LOW, high: float = TIS_CLIP) -> SlimeTisPlan:
    """``icepop_function``: W = ρ inside [low, high] (inclusive), else 0."""
    token = Ratio("token")
    return SlimeTisPlan(ID, Weights(token, zero=(Band(token, low, high),)))


MIS_YAML = Mis()
"""mis.yaml as shipped: token TIS truncated at 2, token RS in [0.5, 2], batch normalisation."""

MIS_VARIANTS: dict[str, tuple[str, Mis]] = {
    "mis": ("mis.yaml: token TIS ≤ 2, token RS [0.5, 2], batch-normalised", MIS_YAML),
    "mis_veto": (
        "mis.yaml plus rs_veto_threshold 1e-4 (a run script's setting)",
        Mis(rs_veto_threshold=1e-4),
    ),
    "mis_token_clip": (
        "token weights clipped to [0.5, 2]",
        Mis(tis_mode="clip", use_rs=False, tis_batch_normalize=False),
    ),
    "mis_token_mask": (
        "tokens with a ratio outside [0.5, 2] dropped",
        Mis(tis_mode="mask", use_rs=False, tis_batch_normalize=False),
    ),
    "mis_sequence_truncate": (
        "sequence weight exp(Σℓ) truncated at 2",
        Mis(tis_level="sequence", use_rs=False, tis_batch_normalize=False),
    ),
    "mis_geometric_mask": (
        "rows whose geometric-mean ratio leaves [0.9999, 1.0001] dropped",
        Mis(
            tis_level="geometric",
            tis_mode="mask",
            tis_lower_bound=0.9999,
            tis_upper_bound=1.0001,
            use_rs=False,
            tis_batch_normalize=False,
        ),
    ),
}

SHARED = (
    "weights: verl's token/sequence raw-weight arrays (the same ±20 clamp), shared; own components"
)

PRESETS = (
    Preset(
        f"{ID}:tis",
        "--use-tis: W = clamp(ρ, 0, 2), ρ unclamped",
        {"use_tis": True, "tis_clip": TIS_CLIP, "tis_clip_low": TIS_CLIP_LOW},
        tis_plan(),
        "own components (ρ unclamped)",
    ),
    Preset(
        f"{ID}:icepop",
        "icepop_function: W = ρ inside [0, 2], else 0",
        {
            "use_tis": True,
            "custom_tis_function_path": "slime.backends.megatron_utils.loss.icepop_function",
            "tis_clip": TIS_CLIP,
            "tis_clip_low": TIS_CLIP_LOW,
        },
        icepop_plan(),
        "own components (ρ unclamped)",
    ),
    *(
        Preset(
            f"{ID}:{name}",
            purpose,
            options.config(),
            mis_plan(options),
            SHARED if options.tis_level != "geometric" else "own components",
        )
        for name, (purpose, options) in MIS_VARIANTS.items()
    ),
)

FRAMEWORK = Framework(
    id=ID,
    title="slime",
    sources=SOURCES,
    metrics=(SlimeLogged(),),
    aggregation=(
        "a mean per sample over its valid tokens, summed, divided by the step's sample count "
        "(the default; --calculate-per-token-loss makes it a token mean, not reproduced)"
    ),
    presets=PRESETS,
)
