"""Translation tables of NeMo-RL, AReaL, SkyRL, prime-rl and open-instruct
(:mod:`rcdiag.frameworks.translate`, docs/frameworks.md, "Recommendations")."""

from __future__ import annotations

from collections.abc import Callable, Mapping
from typing import Any

from rcdiag.frameworks import (
    areal,
    areal_modes,
    nemo_rl,
    nemo_rl_modes,
    open_instruct,
    prime_rl,
    skyrl,
    skyrl_modes,
)
from rcdiag.frameworks.base import Pin
from rcdiag.frameworks.translate_base import (
    Entry,
    Part,
    Table,
    Translator,
    lacking,
    ratio_band,
    yaml_scalar,
)

# ----------------------------------------------------------------------------------------------
# NeMo-RL (loss_fn.* of a GRPO configuration)

NEMO_UNCLAMPED = "NeMo-RL exponentiates ℓ unclamped (verl clamps it to ±20)"


def _nemo_is(part: Part) -> Entry:
    if part.icepop:
        keys = nemo_rl_modes.config("icepop", part.lo, part.hi)
        if part.level == "token":
            return Entry(keys, True, NEMO_UNCLAMPED)
        return Entry(
            keys, False, "NeMo-RL's icepop is per token: closest to verl's sequence IcePop"
        )
    keys = nemo_rl_modes.config("tis", None, part.hi)
    if part.level == "sequence":
        return Entry(
            keys,
            False,
            "NeMo-RL truncates only token weights (sequence_level_importance_ratios has no "
            "truncation and changes the PPO ratio too): closest, token tis",
        )
    return Entry(keys, True, f"type tis clamps to [0, ratio]. {NEMO_UNCLAMPED}")


def _nemo_geo(part: Part) -> Entry:
    lo, hi = ratio_band(part) if part.kind == "criterion" else (part.lo, part.hi)
    return Entry(
        nemo_rl_modes.config("seq-mask-tis", lo, hi),
        False,
        "closest: seq-mask-tis zeroes the weight of sequences whose geometric-mean ratio leaves "
        "the band and weights the others by the untruncated token ratio (one truncation type: it "
        "replaces the token TIS)",
    )


NEMO_TABLE: Table = {
    "token_tis": _nemo_is,
    "sequence_tis": _nemo_is,
    "token_icepop": _nemo_is,
    "sequence_icepop": _nemo_is,
    "seq_mean_k1": _nemo_geo,
    "legacy_geometric_rs": _nemo_geo,
    "batch_norm": lacking("NeMo-RL", "batch normalisation of the IS weights"),
}
NEMO_DEFAULT = lacking("NeMo-RL", "rejection of this kind")


def nemo_render(config: Mapping[str, Any]) -> str:
    head = f"# for {nemo_rl.PIN.version}: a GRPO configuration (YAML)"
    keys = config or {f"{nemo_rl_modes.LOSS}use_importance_sampling_correction": False}
    sections: dict[str, list[str]] = {}
    for key, value in keys.items():
        section, name = key.split(".", 1)
        sections.setdefault(section, []).append(f"  {name}: {yaml_scalar(value)}")
    body = [f"{section}:\n" + "\n".join(lines) for section, lines in sections.items()]
    return "\n".join([head, *body])


# ----------------------------------------------------------------------------------------------
# SkyRL (trainer.algorithm.off_policy_correction.*)

SKYRL_CLAMP = "SkyRL clamps ℓ (or the row's sum or mean of ℓ) to ±20 before exponentiating, as verl"


def _skyrl(
    options: Callable[[Part], skyrl_modes.Skyrl], exact: bool, note: str
) -> Callable[[Part], Entry]:
    return lambda part: Entry(options(part).config(), exact, note)


def _band(part: Part) -> tuple[float, float]:
    return ratio_band(part) if part.kind == "criterion" else (part.lo, part.hi)


SKYRL_TABLE: Table = {
    "token_tis": _skyrl(
        lambda p: skyrl_modes.Skyrl("token", token_tis_ratio_clip_high=p.hi), True, SKYRL_CLAMP
    ),
    "sequence_tis": _skyrl(
        lambda p: skyrl_modes.Skyrl("sequence", sequence_tis_ratio_clip_high=p.hi),
        True,
        SKYRL_CLAMP,
    ),
    "token_icepop": _skyrl(
        lambda p: skyrl_modes.Skyrl(
            "token", token_tis_ratio_clip_high=p.hi, token_mask=(p.lo, p.hi)
        ),
        False,
        "closest: the token mask drops the tokens outside [low, high] from the loss mask, where "
        "verl's IcePop gives them weight 0; the others keep their ratio (the cap at high cuts none)",
    ),
    "token_k1": _skyrl(lambda p: skyrl_modes.Skyrl(token_mask=_band(p)), True, SKYRL_CLAMP),
    "legacy_token_rs": _skyrl(lambda p: skyrl_modes.Skyrl(token_mask=_band(p)), True, SKYRL_CLAMP),
    "seq_sum_k1": _skyrl(
        lambda p: skyrl_modes.Skyrl(sequence_mask_metric="product", product_mask=_band(p)),
        True,
        SKYRL_CLAMP,
    ),
    "legacy_sequence_rs": _skyrl(
        lambda p: skyrl_modes.Skyrl(sequence_mask_metric="product", product_mask=_band(p)),
        True,
        SKYRL_CLAMP,
    ),
    "seq_mean_k1": _skyrl(
        lambda p: skyrl_modes.Skyrl(sequence_mask_metric="geometric", geo_mask=_band(p)),
        True,
        "SkyRL clamps the mean of ℓ, verl each ℓ: the same unless a token has |ℓ| > 20",
    ),
    "legacy_geometric_rs": _skyrl(
        lambda p: skyrl_modes.Skyrl(sequence_mask_metric="geometric", geo_mask=_band(p)),
        True,
        SKYRL_CLAMP,
    ),
    "veto": _skyrl(
        lambda p: skyrl_modes.Skyrl(outlier_token_is_threshold_low=p.hi),
        True,
        "outlier_token_is_threshold_low drops a sequence with a token ratio below τ (the ratio "
        "clamped to e^±20: the same for τ > e^−20)",
    ),
    "batch_norm": lacking("SkyRL", "batch normalisation of the IS weights"),
}
SKYRL_DEFAULT = lacking("SkyRL", "rejection of this kind")


def skyrl_render(config: Mapping[str, Any]) -> str:
    head = f"# for {skyrl.PIN.version}: Hydra overrides of the trainer"
    if not config:
        return f"{head}\n# no off_policy_correction option set: SkyRL applies no correction"
    return "\n".join([head, *(f"{k}={_override(v)}" for k, v in config.items())])


def _override(value: Any) -> str:
    return "null" if value is None else repr(value) if isinstance(value, float) else str(value)


# ----------------------------------------------------------------------------------------------
# AReaL (actor.rejection_sampling.*: one gate at a time)

AREAL_UNCLAMPED = "AReaL exponentiates ℓ unclamped (verl clamps it to ±20)"
AREAL_WEIGHTS = (
    "AReaL then weights the kept tokens by ρ (the geometric-mean ratio for a sequence ratio "
    "gate), where verl's rejection alone does not weight"
)


def _areal(rs: Callable[[Part], areal_modes.Rs], exact: bool, note: str) -> Callable[[Part], Entry]:
    return lambda part: Entry(rs(part).config(), exact, note)


def _areal_lower(part: Part) -> float | None:
    lo = _band(part)[0]
    return lo if lo > 0 else None


AREAL_TABLE: Table = {
    "token_tis": _areal(
        lambda p: areal_modes.Rs(action="clamp", upper=p.hi),
        True,
        f"action clamp clamps ρ to [0, upper]. {AREAL_UNCLAMPED}",
    ),
    "token_icepop": _areal(
        lambda p: areal_modes.Rs(upper=p.hi, lower=p.lo if p.lo > 0 else None),
        True,
        "action mask drops the tokens outside [lower, upper] from the loss mask and keeps the "
        "loss's token count: the same loss as verl's zero weight; the others keep ρ. "
        + AREAL_UNCLAMPED,
    ),
    "sequence_tis": lacking(
        "AReaL",
        "sequence-level IS of the product ratio (its sequence weight is the geometric mean)",
    ),
    "seq_mean_k1": _areal(
        lambda p: areal_modes.Rs(level="sequence", upper=_band(p)[1], lower=_areal_lower(p)),
        False,
        f"closest: a sequence ratio gate on the geometric mean; {AREAL_WEIGHTS}",
    ),
    "legacy_geometric_rs": _areal(
        lambda p: areal_modes.Rs(level="sequence", upper=_band(p)[1], lower=_areal_lower(p)),
        False,
        f"closest: {AREAL_WEIGHTS}",
    ),
    "seq_sum_k1": _areal(
        lambda p: areal_modes.Rs(
            level="sequence", agg="sum", upper=_band(p)[1], lower=_areal_lower(p)
        ),
        False,
        f"closest: a sequence ratio gate on exp(Σℓ); {AREAL_WEIGHTS}",
    ),
    "token_k1": _areal(
        lambda p: areal_modes.Rs(upper=_band(p)[1], lower=_areal_lower(p)),
        False,
        f"closest: a token ratio gate; {AREAL_WEIGHTS}",
    ),
    "seq_max_k2": _areal(
        lambda p: areal_modes.Rs(level="sequence", metric="kl_k2", agg="max", upper=p.hi),
        False,
        f"closest: kl_k2 max drops a sequence whose largest ℓ²/2 exceeds upper, as verl; {AREAL_WEIGHTS}",
    ),
    "seq_mean_k3": _areal(
        lambda p: areal_modes.Rs(level="sequence", metric="kl_k3", agg="mean", upper=p.hi),
        False,
        "closest: AReaL's kl_k3 is e^(−ℓ) − 1 + ℓ (the other direction of verl's e^ℓ − 1 − ℓ); "
        + AREAL_WEIGHTS,
    ),
    "batch_norm": lacking("AReaL", "batch normalisation of the IS weights"),
    "veto": lacking("AReaL", "veto of sequences with a catastrophic token"),
}
AREAL_DEFAULT = lacking("AReaL", "rejection of this kind")


def areal_render(config: Mapping[str, Any]) -> str:
    head = f"# for {areal.PIN.version}: the experiment's YAML"
    if not config:
        return f"{head}\nactor:\n  rejection_sampling: null"
    lines = [
        head,
        "actor:",
        f"  use_decoupled_loss: {yaml_scalar(config['actor.use_decoupled_loss'])}",
    ]
    lines.append("  rejection_sampling:")
    lines += [
        f"    {key.removeprefix(areal_modes.PREFIX)}: {yaml_scalar(value)}"
        for key, value in config.items()
        if key.startswith(areal_modes.PREFIX)
    ]
    return "\n".join(lines)


# ----------------------------------------------------------------------------------------------
# open-instruct (grpo_fast's options: the ρ correction)

OI_CLAMP = "open-instruct clamps ℓ to ±10 (verl ±20): weights differ only where ρ < e^−10"


def _oi_mask(part: Part) -> tuple[float, float]:
    """Mask bounds open-instruct accepts: 0 < lower < 1 and upper > 1 (0 turns a side off)."""
    lo, hi = _band(part)
    return (lo if 0 < lo < 1 else 0.0), (hi if 1 < hi < float("inf") else 0.0)


def _oi_masks(part: Part, sequence: bool = False) -> dict[str, Any]:
    lo, hi = _oi_mask(part)
    keys: dict[str, Any] = {
        "use_rho_correction": True,
        "rho_mask_lower_bound": lo,
        "rho_mask_upper_bound": hi,
    }
    return keys | ({"rho_mask_sequence_level": True} if sequence else {})


OI_WEIGHTS = (
    "the mask zeroes the loss of the tokens outside (verl rejects them) and the others keep ρ "
    "clamped by rho_clamp_upper_bound (2 by default: set 0 for none)"
)

OPEN_INSTRUCT_TABLE: Table = {
    "token_tis": lambda p: Entry(
        {"use_rho_correction": True, "rho_clamp_upper_bound": p.hi}, True, OI_CLAMP
    ),
    "token_icepop": lambda p: Entry(
        {
            "use_rho_correction": True,
            "rho_clamp_upper_bound": 0.0,
            "rho_mask_lower_bound": p.lo,
            "rho_mask_upper_bound": p.hi,
        },
        True,
        "the mask bounds zero the loss of the tokens outside, as verl's IcePop weight 0. "
        + OI_CLAMP,
    ),
    "sequence_tis": lacking("open-instruct", "sequence-level IS of the product ratio"),
    "token_k1": lambda p: Entry(_oi_masks(p), False, f"closest: {OI_WEIGHTS}"),
    "legacy_token_rs": lambda p: Entry(_oi_masks(p), False, f"closest: {OI_WEIGHTS}"),
    "seq_mean_k1": lambda p: Entry(
        _oi_masks(p, sequence=True),
        False,
        "closest: rho_mask_sequence_level zeroes the loss of the sequences whose geometric-mean ρ "
        "leaves the bounds, and weights the others by that ρ (clamped)",
    ),
    "legacy_geometric_rs": lambda p: Entry(
        _oi_masks(p, sequence=True), False, "closest: as for seq_mean_k1"
    ),
    "batch_norm": lacking("open-instruct", "batch normalisation of the IS weights"),
    "veto": lacking("open-instruct", "veto of sequences with a catastrophic token"),
}
OPEN_INSTRUCT_DEFAULT = lacking("open-instruct", "rejection of this kind")


def open_instruct_render(config: Mapping[str, Any]) -> str:
    head = f"# for {open_instruct.PIN.version}: options of open_instruct/grpo_fast.py"
    keys = config or {"use_rho_correction": False}
    return " \\\n".join(
        [
            head + "\n" + _flag(*next(iter(keys.items()))),
            *(_flag(k, v) for k, v in list(keys.items())[1:]),
        ]
    )


def _flag(key: str, value: Any) -> str:
    text = str(value).lower() if isinstance(value, bool) else repr(value)
    return f"--{key} {text}"


# ----------------------------------------------------------------------------------------------
# prime-rl (the trainer's loss: none of verl's mechanisms)

PRIME_CLOSEST = (
    "closest: trainer.loss.type ipo, a token trust region on |p_train − p_rollout| (another "
    "statistic: no threshold of it equals verl's)"
)
PRIME_TABLE: Table = {
    "token_tis": lacking(
        "prime-rl",
        "truncated IS of the rollout ratio (its default loss masks by |Δp| and advantage sign)",
    ),
    "sequence_tis": lacking("prime-rl", "sequence-level IS"),
    "token_icepop": lacking("prime-rl", "IcePop", PRIME_CLOSEST),
    "token_k1": lacking("prime-rl", "token rejection on the ratio", PRIME_CLOSEST),
}
PRIME_DEFAULT = lacking("prime-rl", "mechanism of this kind")


def prime_render(config: Mapping[str, Any]) -> str:
    return (
        f"# for {prime_rl.PIN.version}: the rl command's TOML\n"
        "# keep the default loss: prime-rl has none of these mechanisms (notes below)"
    )


MORE_TRANSLATORS: dict[str, Translator] = {
    "nemo_rl": Translator(NEMO_TABLE, NEMO_DEFAULT, nemo_render),
    "areal": Translator(AREAL_TABLE, AREAL_DEFAULT, areal_render),
    "skyrl": Translator(SKYRL_TABLE, SKYRL_DEFAULT, skyrl_render),
    "prime_rl": Translator(PRIME_TABLE, PRIME_DEFAULT, prime_render),
    "open_instruct": Translator(OPEN_INSTRUCT_TABLE, OPEN_INSTRUCT_DEFAULT, open_instruct_render),
}
MORE_PINS: dict[str, Pin] = {
    "nemo_rl": nemo_rl.PIN,
    "skyrl": skyrl.PIN,
    "areal": areal.PIN,
    "prime_rl": prime_rl.PIN,
    "open_instruct": open_instruct.PIN,
}
