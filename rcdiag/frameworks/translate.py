"""A verl rollout-correction configuration in another framework's own keys (``recommend --framework``).

No decision is made here: the recommendation picks a verl configuration
(:mod:`rcdiag.assess.recommendation.ranking`); this module only rewrites it. The configuration
is split into its mechanisms (IS at a level, each rejection criterion, the veto, batch normalisation) and each
framework's table maps a mechanism onto its keys — exactly, or to the closest thing it has, saying
so — or says the framework lacks it (docs/frameworks.md, "Recommendations").
"""

from __future__ import annotations

from collections.abc import Callable, Mapping
from typing import Any

from rcdiag.correction.config import parse_config
from rcdiag.dialects import Dialect
from rcdiag.frameworks import openrlhf, slime, trl
from rcdiag.frameworks.base import Translation
from rcdiag.frameworks.slime_mis import MIS_KEYS
from rcdiag.frameworks.translate_base import (
    Entry,
    Part,
    Table,
    Translator,
    lacking,
    mechanism,
    parts,
    ratio_band,
    yaml_scalar,
)
from rcdiag.frameworks.translate_more import MORE_PINS, MORE_TRANSLATORS

# ----------------------------------------------------------------------------------------------
# TRL (GRPOConfig keys)

TRL_UNCLAMPED = (
    "TRL exponentiates ℓ unclamped (verl clamps it to ±20: only ratios beyond e^±20 differ)"
)


def _trl_mode(mode: str) -> Callable[[Part], Entry]:
    def entry(part: Part) -> Entry:
        keys = trl.config(mode, part.hi, part.lo if part.icepop and part.lo > 0 else None)
        return Entry(keys, True, TRL_UNCLAMPED)

    return entry


TRL_TABLE: Table = {
    "token_tis": _trl_mode("token_truncate"),
    "sequence_tis": _trl_mode("sequence_truncate"),
    "token_icepop": _trl_mode("token_mask"),
    "sequence_icepop": _trl_mode("sequence_mask"),
    "batch_norm": lacking("TRL", "batch normalisation of the IS weights"),
    "veto": lacking("TRL", "veto of sequences with a catastrophic token"),
}
TRL_DEFAULT = lacking("TRL", "rejection of tokens or sequences (only its IS correction)")


# ----------------------------------------------------------------------------------------------
# slime (built-in flags, or the MIS helper's YAML)

SLIME_VERSION = slime.PIN.version
SLIME_ICEPOP = "slime.backends.megatron_utils.loss.icepop_function"
SLIME_BUILTIN = {"use_tis", "tis_level", "tis_mode", "tis_upper_bound", "tis_lower_bound"}
"""Keys a token TIS alone sets: slime's built-in --use-tis --tis-clip runs it without the helper."""
MIS_DEFAULTS: dict[str, Any] = {
    "use_tis": True,
    "use_rs": False,
    "tis_level": "token",
    "rs_level": "token",
    "tis_mode": "truncate",
    "tis_lower_bound": None,
    "rs_lower_bound": None,
    "rs_upper_bound": None,
    "rs_veto_threshold": None,
    "tis_batch_normalize": False,
}
"""mis.yaml's keys where the translation sets none: mechanisms off, bounds from the TIS bounds."""

MIS_FLAGS = (
    "--custom-config-path mis.yaml "
    "--custom-tis-function-path examples.train_infer_mismatch_helper.mis.compute_mis_weights_with_cp"
)
SLIME_CLAMP = (
    "the MIS helper clamps log ratios to ±20 as verl does (the built-in --use-tis does not: only "
    "ratios beyond e^±20 differ)"
)


SLIME_MASK = (
    "closest: the MIS helper's tis_mode mask drops the tokens outside the bounds from the loss "
    "mask, where verl's IcePop gives them weight 0"
)


def _slime_is(part: Part) -> Entry:
    keys: dict[str, Any] = {
        "use_tis": True,
        "tis_level": part.level,
        "tis_upper_bound": part.hi,
        "tis_lower_bound": part.lo,
    }
    if part.icepop and part.level == "token":
        keys["tis_mode"] = "icepop"  # slime's built-in icepop_function, unless the helper is needed
        return Entry(keys, True, "icepop_function gives weight 0 outside [low, high]; ρ unclamped")
    if part.icepop:
        keys["tis_mode"] = "mask"
        return Entry(keys, False, SLIME_MASK)
    keys["tis_mode"] = "truncate"
    return Entry(keys, True, SLIME_CLAMP)


def _slime_rs(level: str) -> Callable[[Part], Entry]:
    def entry(part: Part) -> Entry:
        lo, hi = ratio_band(part) if part.kind == "criterion" else (part.lo, part.hi)
        keys = {"use_rs": True, "rs_level": level, "rs_lower_bound": lo, "rs_upper_bound": hi}
        note = SLIME_CLAMP
        if level == "geometric" and part.kind == "criterion":
            note = "slime clamps the mean of ℓ, verl each ℓ: the same unless a token has |ℓ| > 20"
        return Entry(keys, True, note)

    return entry


def slime_finish(keys: dict[str, Any]) -> tuple[dict[str, Any], list[str], bool]:
    """The MIS helper runs rejection only with TIS on and always applies its RS band: an RS band
    that rejects nothing ([0, 1e9]: ratios are clamped to e^±20 first) is set where only a veto is
    wanted, and uncapped weights where verl has rejection without IS (not the same: slime then
    weights by ρ). mis.py reads every key of mis.yaml, so every one is written (null where unset)."""
    notes: list[str] = []
    exact = True
    if not keys:
        return keys, notes, exact
    if keys.get("use_rs") and "rs_lower_bound" not in keys:
        keys = {**keys, "rs_level": "token", "rs_lower_bound": 0.0, "rs_upper_bound": 1e9}
    if keys.get("use_rs") and "tis_upper_bound" not in keys:
        keys = {"tis_level": "token", "tis_mode": "truncate", "tis_upper_bound": 1e9, **keys}
        notes.append(
            "slime's MIS helper rejects only with TIS on: uncapped token weights (closest to "
            "verl's rejection without IS, which does not weight)"
        )
        exact = False
    if set(keys) <= SLIME_BUILTIN and keys.get("tis_level") == "token":
        builtin = {"use_tis": True, "tis_clip": keys["tis_upper_bound"], "tis_clip_low": 0.0}
        if keys.get("tis_mode") == "truncate":
            return builtin, notes, exact  # --use-tis --tis-clip C alone
        if keys.get("tis_mode") == "icepop":
            builtin["tis_clip_low"] = keys["tis_lower_bound"]
            return {**builtin, "custom_tis_function_path": SLIME_ICEPOP}, notes, exact
    if keys.get("tis_mode") == "icepop":  # with rejection or batch normalisation: the helper
        keys = {**keys, "tis_mode": "mask"}
        notes.append(
            f"token_icepop: {SLIME_MASK} (icepop_function cannot be combined with the helper)"
        )
        exact = False
    full = {**MIS_DEFAULTS, **keys}
    return {k: full[k] for k in MIS_KEYS}, notes, exact


SLIME_TABLE: Table = {
    "token_tis": _slime_is,
    "sequence_tis": _slime_is,
    "token_icepop": _slime_is,
    "sequence_icepop": _slime_is,
    "batch_norm": lambda part: Entry({"tis_batch_normalize": True}, True),
    "token_k1": _slime_rs("token"),
    "seq_sum_k1": _slime_rs("sequence"),
    "seq_mean_k1": _slime_rs("geometric"),
    "legacy_token_rs": _slime_rs("token"),
    "legacy_sequence_rs": _slime_rs("sequence"),
    "legacy_geometric_rs": _slime_rs("geometric"),
    "seq_max_k2": lacking("slime's MIS helper", "sequence trust region (largest ½ℓ²)"),
    "seq_mean_k3": lacking("slime's MIS helper", "sequence trust region (mean K3)"),
    "veto": lambda part: Entry(
        {"use_rs": True, "rs_veto_threshold": part.hi},
        True,
        "rs_veto_threshold drops a sequence with a token of unclamped ℓ < ln τ, as verl's veto",
    ),
}
SLIME_DEFAULT = lacking("slime's MIS helper", "criterion of this kind")


def slime_render(config: Mapping[str, Any]) -> str:
    """Built-in flags for token TIS alone, else the MIS helper's YAML and its two flags."""
    head = f"# for {SLIME_VERSION}"
    if not config:
        return f"{head}\n# no --use-tis: slime applies no correction"
    if "use_rs" not in config:
        flags = [
            f"--{k.replace('_', '-')} {yaml_scalar(v)}" for k, v in config.items() if k != "use_tis"
        ]
        return " \\\n".join([head + "\n--use-tis", *flags])
    lines = [head, "# mis.yaml (examples/train_infer_mismatch_helper)"]
    lines += [f"{k}: {yaml_scalar(v)}" for k, v in config.items()]
    return "\n".join(lines) + f"\n# then run slime with: --use-tis {MIS_FLAGS}"


# ----------------------------------------------------------------------------------------------
# OpenRLHF (train_ppo_ray flags)

OPENRLHF_UNCLAMPED = "OpenRLHF exponentiates ℓ unclamped (verl clamps it to ±20)"


def _openrlhf_is(part: Part) -> Entry:
    if part.icepop:
        keys = openrlhf.config("token", "mask", part.lo, part.hi)
        if part.level == "token":
            return Entry(keys, True, OPENRLHF_UNCLAMPED)
        return Entry(
            keys, False, "OpenRLHF gates a sequence by its geometric mean only: closest, token mask"
        )
    keys = openrlhf.config("token", "clip", 0.0, part.hi)
    if part.level == "sequence":
        return Entry(keys, False, "OpenRLHF has no sequence-level IS: closest, its token clip")
    return Entry(
        keys,
        True,
        f"its clip mode clamps to [low, high]; low 0 makes it truncation. {OPENRLHF_UNCLAMPED}",
    )


def _openrlhf_geo(part: Part) -> Entry:
    lo, hi = ratio_band(part) if part.kind == "criterion" else (part.lo, part.hi)
    return Entry(
        openrlhf.config("seq", "mask", lo, hi),
        False,
        "closest: level seq zeroes the weight of sequences whose geometric-mean ratio leaves "
        "the band, and weights the others by the untruncated token ratio (one gate at a time: it "
        "replaces the token TIS)",
    )


OPENRLHF_TABLE: Table = {
    "token_tis": _openrlhf_is,
    "sequence_tis": _openrlhf_is,
    "token_icepop": _openrlhf_is,
    "sequence_icepop": _openrlhf_is,
    "seq_mean_k1": _openrlhf_geo,
    "legacy_geometric_rs": _openrlhf_geo,
}
OPENRLHF_DEFAULT = lacking("OpenRLHF", "rejection of this kind")


def openrlhf_render(config: Mapping[str, Any]) -> str:
    head = f"# for {openrlhf.PIN.version}: flags of openrlhf.cli.train_ppo_ray"
    if not config:
        return f"{head}\n# --{openrlhf.LEVEL} off (its default): OpenRLHF applies no correction"
    lo, hi = config[openrlhf.THRESHOLD]
    flags = [f"--{k} {v}" for k, v in config.items() if k != openrlhf.THRESHOLD]
    return " \\\n".join(
        [head + "\n" + flags[0], *flags[1:], f"--{openrlhf.THRESHOLD} {lo!r} {hi!r}"]
    )


def trl_render(config: Mapping[str, Any]) -> str:
    keys = config or {"vllm_importance_sampling_correction": False}
    inner = "".join(f"    {k}={v!r},\n" for k, v in keys.items())
    return f"# for {trl.PIN.version}: trl.GRPOConfig\nGRPOConfig(\n    ...,\n{inner})"


TRANSLATORS: dict[str, Translator] = {
    "trl": Translator(TRL_TABLE, TRL_DEFAULT, trl_render),
    "slime": Translator(SLIME_TABLE, SLIME_DEFAULT, slime_render, slime_finish),
    "openrlhf": Translator(OPENRLHF_TABLE, OPENRLHF_DEFAULT, openrlhf_render),
}
"""The frameworks rcdiag can translate a configuration for, and their tables."""

TRANSLATORS.update(MORE_TRANSLATORS)

FRAMEWORK_PINS = {"trl": trl.PIN, "slime": slime.PIN, "openrlhf": openrlhf.PIN, **MORE_PINS}


def translate(framework: str, config: Mapping[str, Any], dialect: Dialect) -> Translation:
    """``config`` (verl keys of ``dialect``) in ``framework``'s keys.

    Mechanisms map through the framework's table in order; a later one never overrides a key an
    earlier one set (the framework then has one slot for two mechanisms: the note says so).
    """
    translator = TRANSLATORS[framework]
    keys: dict[str, Any] = {}
    notes: list[str] = []
    exact = True
    for part in parts(parse_config(config, dialect)):
        name = mechanism(part)
        entry = translator.table.get(name, translator.default)(part)
        clash = [k for k in entry.keys if k in keys and keys[k] != entry.keys[k]]
        if clash:
            exact = False
            notes.append(f"{name}: left out, {framework} sets {', '.join(clash)} once")
            continue
        keys.update(entry.keys)
        exact &= entry.exact
        if entry.note:
            notes.append(f"{name}: {entry.note}")
    if translator.finish is not None:
        keys, more, whole = translator.finish(keys)
        notes += more
        exact &= whole
    version = FRAMEWORK_PINS[framework].version
    return Translation(keys, translator.render(keys), tuple(notes), exact, version)
