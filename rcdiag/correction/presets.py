"""verl's rollout-correction presets, as data: one registry per dialect (docs/presets.md).

Each preset is the mapping of verl keys its classmethod produces with default arguments, plus one line
of purpose. ``latest`` holds the 19 presets of verl at 1dda039; ``legacy`` the PR #4070 names and the
PR #3984 aliases.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass, field
from typing import Any

from rcdiag.dialects import Dialect


@dataclass(frozen=True)
class Preset:
    """A named configuration: verl's keys and values, and what it is for."""

    name: str
    purpose: str
    config: Mapping[str, Any] = field(default_factory=dict)


def _latest(name: str, purpose: str, **config: Any) -> Preset:
    base: dict[str, Any] = {
        "rollout_is": None,
        "rollout_is_threshold": 2.0,
        "rollout_is_batch_normalize": False,
        "rollout_rs": None,
        "rollout_rs_threshold": None,
        "bypass_mode": False,
        "loss_type": "ppo_clip",
    }
    return Preset(name, purpose, {**base, **config})


GEO = {"rollout_rs": "seq_mean_k1", "rollout_rs_threshold": "0.999_1.001"}
K3 = {"rollout_rs": "seq_mean_k3", "rollout_rs_threshold": 0.01}
BYPASS = {"bypass_mode": True}
PG = {"bypass_mode": True, "loss_type": "reinforce"}
ICEPOP = {"rollout_is": "token", "rollout_is_threshold": "0.5_5.0"}

LATEST_PRESETS: tuple[Preset, ...] = (
    _latest("decoupled_token_is", "token-level truncated IS (C = 2)", rollout_is="token"),
    _latest("decoupled_token_icepop", "token IS keeping only weights in [0.5, 5]", **ICEPOP),
    _latest("decoupled_seq_is", "sequence-level truncated IS (C = 2)", rollout_is="sequence"),
    _latest(
        "decoupled_seq_is_rs",
        "sequence TIS plus rejection of sequences whose ratio leaves [0.5, 2]",
        rollout_is="sequence",
        rollout_rs="seq_sum_k1",
        rollout_rs_threshold="0.5_2.0",
    ),
    _latest("decoupled_geo_rs", "reject sequences whose geometric-mean ratio leaves ±0.1%", **GEO),
    _latest(
        "decoupled_geo_rs_seq_tis", "geometric RS plus sequence TIS", rollout_is="sequence", **GEO
    ),
    _latest("decoupled_geo_rs_token_tis", "geometric RS plus token TIS", rollout_is="token", **GEO),
    _latest("decoupled_k3_rs", "reject sequences whose mean K3 divergence exceeds 0.01", **K3),
    _latest("decoupled_k3_rs_seq_tis", "K3 RS plus sequence TIS", rollout_is="sequence", **K3),
    _latest("decoupled_k3_rs_token_tis", "K3 RS plus token TIS", rollout_is="token", **K3),
    _latest("bypass_ppo_clip", "rollout log-probs as π_old; PPO clip only", **BYPASS),
    _latest("bypass_ppo_clip_geo_rs", "bypass PPO clip with geometric RS", **BYPASS, **GEO),
    _latest("bypass_ppo_clip_k3_rs", "bypass PPO clip with K3 RS", **BYPASS, **K3),
    _latest("bypass_pg_is", "policy gradient with sequence TIS", rollout_is="sequence", **PG),
    _latest("bypass_pg_token_icepop", "policy gradient with token IcePop [0.5, 5]", **ICEPOP, **PG),
    _latest("bypass_pg_geo_rs", "policy gradient with geometric RS", **GEO, **PG),
    _latest(
        "bypass_pg_geo_rs_seq_tis",
        "PG, geometric RS, sequence TIS",
        rollout_is="sequence",
        **GEO,
        **PG,
    ),
    _latest(
        "bypass_pg_geo_rs_token_tis", "PG, geometric RS, token TIS", rollout_is="token", **GEO, **PG
    ),
    _latest("disabled", "no correction; off-policy metrics only"),
)


_SEED_BASE: dict[str, Any] = {
    "rollout_is": None,
    "rollout_is_threshold": 2.0,
    "rollout_is_batch_normalize": False,
    "rollout_rs": None,
    "rollout_rs_threshold": None,
    "rollout_rs_threshold_lower": None,
    "rollout_token_veto_threshold": None,
}


def _legacy(name: str, purpose: str, **config: Any) -> Preset:
    """A PR #4070 preset, with that PR's mode fields."""
    base = {**_SEED_BASE, "bypass_mode": False, "use_policy_gradient": False}
    return Preset(name, purpose, {**base, **config})


def _pr3984(name: str, purpose: str, **config: Any) -> Preset:
    """A PR #3984 name, with that PR's mode fields (renamed in #4070)."""
    base = {
        **_SEED_BASE,
        "bypass_old_logprob_for_rollout": False,
        "use_pure_rollout_correction": False,
    }
    return Preset(name, purpose, {**base, **config})


LEGACY_GEO = {
    "rollout_rs": "geometric",
    "rollout_rs_threshold": 1.001,
    "rollout_token_veto_threshold": 1e-4,
}
SEQ_IS_RS = {"rollout_is": "sequence", "rollout_rs": "sequence", "rollout_rs_threshold": 2.0}
LEGACY_BYPASS_PG = {"bypass_mode": True, "use_policy_gradient": True}
PURE = {"bypass_old_logprob_for_rollout": True, "use_pure_rollout_correction": True}

LEGACY_PRESETS: tuple[Preset, ...] = (
    _legacy("decoupled_token_is", "token-level truncated IS (C = 2)", rollout_is="token"),
    _legacy("decoupled_seq_is", "sequence-level truncated IS (C = 2)", rollout_is="sequence"),
    _legacy("decoupled_seq_is_rs", "sequence TIS plus sequence RS in [0.5, 2]", **SEQ_IS_RS),
    _legacy("decoupled_geo_rs", "geometric RS at 1.001 plus veto at 1e-4", **LEGACY_GEO),
    _legacy(
        "ppo_is_bypass",
        "bypass mode with token TIS (PPO clip)",
        rollout_is="token",
        bypass_mode=True,
    ),
    _legacy(
        "pg_is", "policy gradient with sequence TIS", rollout_is="sequence", **LEGACY_BYPASS_PG
    ),
    _legacy(
        "pg_rs", "policy gradient with geometric RS plus veto", **LEGACY_GEO, **LEGACY_BYPASS_PG
    ),
    _legacy("disabled", "no correction; off-policy metrics only"),
    _pr3984("token_is", "#3984 name of decoupled_token_is", rollout_is="token"),
    _pr3984("token_tis", "#3984 alias of token_is", rollout_is="token"),
    _pr3984("seq_is", "#3984 name of decoupled_seq_is", rollout_is="sequence"),
    _pr3984("seq_is_rs", "#3984 name of decoupled_seq_is_rs", **SEQ_IS_RS),
    _pr3984(
        "seq_mis",
        "sequence TIS plus sequence RS with upper bound only (ratio ≤ 2)",
        **SEQ_IS_RS,
        rollout_rs_threshold_lower=0.0,
    ),
    _pr3984("geo_rs", "#3984 name of decoupled_geo_rs", **LEGACY_GEO),
    _pr3984(
        "geo_mis",
        "geometric RS in [0.999, 1.001] plus veto at 1e-4",
        **LEGACY_GEO,
        rollout_rs_threshold_lower=0.999,
    ),
    _pr3984("pure_is", "#3984 name of pg_is", rollout_is="sequence", **PURE),
    _pr3984("pure_rs", "#3984 name of pg_rs", **LEGACY_GEO, **PURE),
)

PRESETS: dict[Dialect, dict[str, Preset]] = {
    "latest": {p.name: p for p in LATEST_PRESETS},
    "legacy": {p.name: p for p in LEGACY_PRESETS},
}
