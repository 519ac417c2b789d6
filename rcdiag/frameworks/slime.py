"""THUDM slime: ``train_rollout_logprob_abs_diff``, the built-in TIS and IcePop, and the MIS helper.

Read on slime's main branch at commit 624b824 (2026-08-21): ``slime/backends/megatron_utils/loss.py``
(the metric, ``vanilla_tis_function``, ``icepop_function``, which reducer the metrics get),
``slime/backends/megatron_utils/cp_utils.py`` (``get_sum_of_sample_mean``: a mean per sample,
summed; the step divides by its sample count), ``slime/utils/arguments.py`` (the flags and
``--custom-config-path``) and ``examples/train_infer_mismatch_helper/mis.py`` / ``mis.yaml``.
docs/frameworks.md, "slime".
"""

from __future__ import annotations

from dataclasses import dataclass

from rcdiag.correction.engine import Component
from rcdiag.correction.external import Band, Ratio, Weights
from rcdiag.correction.modes import ModePlan
from rcdiag.frameworks.base import Framework, Pin, Preset, Source
from rcdiag.frameworks.slime_metrics import ID, SlimeAbsDiff, SlimeMisPpl, SlimeTisLogged
from rcdiag.frameworks.slime_mis import Mis, SlimeMisPlan, mis_plan

__all__ = ["Mis", "SlimeMisPlan", "icepop_plan", "mis_plan", "tis_plan"]


PIN = Pin("THUDM/slime", "main", "624b824a898ab0ec1fcb4d373004c7f3852bf515", "2026-08-21")
REPO, COMMIT = PIN.repo, PIN.commit

SOURCES = (
    Source(
        REPO,
        "slime/backends/megatron_utils/loss.py",
        COMMIT,
        "train_rollout_logprob_abs_diff; vanilla_tis_function; icepop_function; mismatch metrics "
        "reduced with the loss masks before rejection",
    ),
    Source(
        REPO,
        "slime/backends/megatron_utils/cp_utils.py",
        COMMIT,
        "get_sum_of_sample_mean: per-sample masked sum over max(denominator, 1), summed",
    ),
    Source(
        REPO,
        "slime/utils/arguments.py",
        COMMIT,
        "--use-tis, --tis-clip (2.0), --tis-clip-low (0), --custom-tis-function-path, "
        "--custom-config-path (YAML keys set as arguments), --get-mismatch-metrics",
    ),
    Source(
        REPO,
        "examples/train_infer_mismatch_helper/mis.py",
        COMMIT,
        "compute_mis_weights: tis_level/tis_mode/bounds, use_rs, rs_veto_threshold, batch "
        "normalisation, the mis_ metrics",
    ),
    Source(
        REPO,
        "examples/train_infer_mismatch_helper/mis.yaml",
        COMMIT,
        "the helper's shipped configuration (the slime:mis preset)",
    ),
)


@dataclass(frozen=True)
class SlimeTisPlan(ModePlan):
    def components(self) -> tuple[Component, ...]:
        assert self.weights is not None
        return (SlimeAbsDiff(), SlimeTisLogged(self.weights), self.outcome())


TIS_CLIP, TIS_CLIP_LOW = 2.0, 0.0
"""``--tis-clip`` and ``--tis-clip-low`` defaults."""


def tis_plan(low: float = TIS_CLIP_LOW, high: float = TIS_CLIP) -> SlimeTisPlan:
    """``--use-tis``: W = clamp(ρ, low, high), ρ unclamped."""
    return SlimeTisPlan(ID, Weights(Ratio("token"), "clip", lo=low, hi=high))


def icepop_plan(low: float = TIS_CLIP_LOW, high: float = TIS_CLIP) -> SlimeTisPlan:
    """``icepop_function``: W = ρ inside [low, high] (inclusive), else 0."""
    token = Ratio("token")
    return SlimeTisPlan(ID, Weights(token, zero=(Band(token, low, high),)))


MIS_YAML = Mis(rs_veto_threshold=1e-4)
"""mis.yaml as shipped: token TIS truncated at 2, token RS in [0.5, 2], the 1e-4 veto, batch
normalisation."""

MIS_VARIANTS: dict[str, tuple[str, Mis]] = {
    "mis": (
        "mis.yaml as shipped: token TIS ≤ 2, token RS [0.5, 2], veto 1e-4, batch-normalised",
        MIS_YAML,
    ),
    "mis_no_veto": ("mis.yaml with rs_veto_threshold null", Mis()),
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
    pin=PIN,
    metrics=(SlimeAbsDiff(), SlimeMisPpl()),
    aggregation=(
        "a mean per sample over its valid tokens, summed, divided by the step's sample count "
        "(the default, with one sample per rollout; a rollout of several samples shares one "
        "denominator, and --calculate-per-token-loss makes it a token mean: not reproduced); the "
        "mis_ metrics are logged only with the MIS helper (--custom-tis-function-path mis.py)"
    ),
    presets=PRESETS,
)
