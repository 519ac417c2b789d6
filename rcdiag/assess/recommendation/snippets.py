"""A rollout-correction configuration as text: verl YAML, the Python preset call, plain words.

The YAML is the complete ``algorithm.rollout_correction`` block of the dialect (every key written, so
nothing depends on verl's defaults — the dataclass default ``rollout_is`` is ``"sequence"`` while the
YAML default is null) plus the ``calculate_log_probs`` switch the correction needs. The Python
call is the preset classmethod with its arguments when the configuration is one, else the constructor.
"""

from __future__ import annotations

import json
import math
import re
import textwrap
from collections.abc import Mapping
from typing import Any

from rcdiag.correction.presets import PRESETS
from rcdiag.dialects import Dialect

PRESET_PARAMETERS: dict[Dialect, dict[str, tuple[tuple[str, str], ...]]] = {
    "latest": {
        "decoupled_token_is": (("threshold", "rollout_is_threshold"),),
        "decoupled_seq_is": (("threshold", "rollout_is_threshold"),),
        "decoupled_seq_is_rs": (
            ("is_threshold", "rollout_is_threshold"),
            ("rs_threshold", "rollout_rs_threshold"),
        ),
        "decoupled_geo_rs": (("rs_threshold", "rollout_rs_threshold"),),
        "decoupled_geo_rs_seq_tis": (
            ("is_threshold", "rollout_is_threshold"),
            ("rs_threshold", "rollout_rs_threshold"),
        ),
        "decoupled_geo_rs_token_tis": (
            ("is_threshold", "rollout_is_threshold"),
            ("rs_threshold", "rollout_rs_threshold"),
        ),
        "decoupled_k3_rs": (("rs_threshold", "rollout_rs_threshold"),),
        "decoupled_k3_rs_seq_tis": (
            ("is_threshold", "rollout_is_threshold"),
            ("rs_threshold", "rollout_rs_threshold"),
        ),
        "decoupled_k3_rs_token_tis": (
            ("is_threshold", "rollout_is_threshold"),
            ("rs_threshold", "rollout_rs_threshold"),
        ),
        "bypass_ppo_clip": (),
        "bypass_ppo_clip_geo_rs": (("rs_threshold", "rollout_rs_threshold"),),
        "bypass_ppo_clip_k3_rs": (("rs_threshold", "rollout_rs_threshold"),),
        "bypass_pg_is": (("threshold", "rollout_is_threshold"),),
        "bypass_pg_geo_rs": (("rs_threshold", "rollout_rs_threshold"),),
        "bypass_pg_geo_rs_seq_tis": (
            ("is_threshold", "rollout_is_threshold"),
            ("rs_threshold", "rollout_rs_threshold"),
        ),
        "bypass_pg_geo_rs_token_tis": (
            ("is_threshold", "rollout_is_threshold"),
            ("rs_threshold", "rollout_rs_threshold"),
        ),
        "disabled": (),
    },
    "legacy": {
        "decoupled_token_is": (("threshold", "rollout_is_threshold"),),
        "decoupled_seq_is": (("threshold", "rollout_is_threshold"),),
        "decoupled_geo_rs": (
            ("rs_threshold", "rollout_rs_threshold"),
            ("rs_threshold_lower", "rollout_rs_threshold_lower"),
            ("veto_threshold", "rollout_token_veto_threshold"),
        ),
        "ppo_is_bypass": (("threshold", "rollout_is_threshold"),),
        "pg_is": (("threshold", "rollout_is_threshold"),),
        "disabled": (),
    },
}
"""Classmethod arguments of the presets rcdiag may recommend: argument name → verl key (docs/presets.md).

The IcePop presets take ``threshold`` and ``threshold_lower`` and are handled apart (one key holds
both bounds as ``"lo_hi"``).
"""

YAML_WIDTH = 88
"""The longest comment line of the YAML snippet (the report's YAML box shows it unscrolled)."""

ICEPOP_PRESETS = ("decoupled_token_icepop", "bypass_pg_token_icepop")
IMPORT_LINE = "from verl.trainer.config.algorithm import RolloutCorrectionConfig"


def scalar(value: Any) -> str:
    """A YAML / Python scalar: strings double-quoted (``"1.05"`` must stay a string), floats by repr."""
    if value is None:
        return "null"
    if isinstance(value, bool):
        return "true" if value else "false"
    if isinstance(value, float):
        return repr(value)
    if isinstance(value, int):
        return str(value)
    return json.dumps(str(value), ensure_ascii=False)


def _python_literal(value: Any) -> str:
    if value is None:
        return "None"
    if isinstance(value, bool):
        return "True" if value else "False"
    return scalar(value)


def verl_yaml(config: Mapping[str, Any], comment: str | None = None) -> str:
    """The ``algorithm.rollout_correction`` block (every key) and ``calculate_log_probs: true``.

    The comment is wrapped so that no line is longer than :data:`YAML_WIDTH` characters.
    """
    wrapped = textwrap.wrap(
        " ".join((comment or "").split()),
        YAML_WIDTH - 2,
        break_long_words=False,
        break_on_hyphens=False,
    )
    lines = [f"# {line}" for line in wrapped]
    lines += ["algorithm:", "  rollout_correction:"]
    lines += [f"    {key}: {scalar(value)}" for key, value in config.items()]
    lines += [
        "actor_rollout_ref:",
        "  rollout:",
        "    calculate_log_probs: true  # required by rollout correction",
    ]
    return "\n".join(lines) + "\n"


def cli_overrides(config: Mapping[str, Any]) -> str:
    """The same block as Hydra overrides for ``python3 -m verl.trainer.main_ppo``, shell-quoted.

    Example:
        >>> print(cli_overrides({"rollout_is": "token", "rollout_rs_threshold": "1.05,42.4"}))
        algorithm.rollout_correction.rollout_is=token \\
        'algorithm.rollout_correction.rollout_rs_threshold="1.05,42.4"' \\
        actor_rollout_ref.rollout.calculate_log_probs=True
    """
    lines = []
    for key, value in config.items():
        name = f"algorithm.rollout_correction.{key}"
        if isinstance(value, str) and re.fullmatch(r"[A-Za-z_][A-Za-z0-9_]*", value):
            lines.append(f"{name}={value}")
        elif isinstance(value, str):
            lines.append(f"'{name}={json.dumps(value)}'")  # quoted for Hydra, then for the shell
        else:
            lines.append(f"{name}={scalar(value)}")
    lines.append("actor_rollout_ref.rollout.calculate_log_probs=True")
    return " \\\n".join(lines)


def _icepop_arguments(value: Any) -> dict[str, Any] | None:
    if not isinstance(value, str) or "_" not in value:
        return None
    lo, hi = value.split("_", 1)
    try:
        return {"threshold": float(hi), "threshold_lower": float(lo)}
    except ValueError:
        return None


def matching_preset(
    config: Mapping[str, Any], dialect: Dialect
) -> tuple[str, dict[str, Any]] | None:
    """The preset whose classmethod produces ``config``, with the arguments it needs; else None."""
    registry = PRESETS[dialect]
    parameters = PRESET_PARAMETERS[dialect]
    for name in (*parameters, *ICEPOP_PRESETS):
        if name not in registry:
            continue
        preset = registry[name].config
        if name in ICEPOP_PRESETS:
            arguments = _icepop_arguments(config.get("rollout_is_threshold"))
            if arguments is None:
                continue
            free = {"rollout_is_threshold"}
        else:
            arguments = {arg: config.get(key) for arg, key in parameters[name]}
            free = {key for _, key in parameters[name]}
            if "rollout_is_threshold" in free and _icepop_arguments(
                config.get("rollout_is_threshold")
            ):
                continue  # a "lo_hi" IS threshold is IcePop, not truncation
        keys = set(preset) | set(config)
        if all(key in free or config.get(key, preset.get(key)) == preset.get(key) for key in keys):
            return name, arguments
    return None


def python_call(config: Mapping[str, Any], dialect: Dialect) -> str:
    """``RolloutCorrectionConfig.<preset>(…)`` or ``RolloutCorrectionConfig(…)``, with its import.

    Example:
        >>> from rcdiag.assess.recommendation.candidates import TOKEN_TIS, base_config
        >>> print(python_call({**base_config("latest"), **TOKEN_TIS}, "latest"))
        from verl.trainer.config.algorithm import RolloutCorrectionConfig
        <BLANKLINE>
        config = RolloutCorrectionConfig.decoupled_token_is(threshold=2.0)
    """
    found = matching_preset(config, dialect)
    if found is not None:
        name, arguments = found
        inner = ", ".join(f"{k}={_python_literal(v)}" for k, v in arguments.items())
        call = f"RolloutCorrectionConfig.{name}({inner})"
    else:
        base = PRESETS[dialect]["disabled"].config
        shown = {
            k: v
            for k, v in config.items()
            if k == "rollout_is"
            or (k == "rollout_is_threshold" and config.get("rollout_is") is not None)
            or v != base.get(k, object())
        }
        inner = ",\n    ".join(f"{k}={_python_literal(v)}" for k, v in shown.items())
        call = f"RolloutCorrectionConfig(\n    {inner},\n)"
    return f"{IMPORT_LINE}\n\nconfig = {call}"


def _bound(x: float) -> str:
    return f"{x:.4g}"


def _criterion_words(option: str, threshold: str) -> str:
    if option.endswith("k1"):
        if "_" in threshold:
            lo_text, hi_text = threshold.split("_", 1)
            lo, hi = float(lo_text), float(hi_text)
        else:
            hi = float(threshold)
            lo = 1.0 / hi
        # the k1 statistic is −log ρ: the bounds act on π_rollout/π_train (docs/correction.md)
        band = f"[{_bound(1.0 / hi)}, {_bound(1.0 / lo)}]"
        what = {
            "token_k1": "tokens whose ratio π_train/π_rollout",
            "seq_sum_k1": "sequences whose ratio ∏ρ",
            "seq_mean_k1": "sequences whose geometric-mean ratio",
        }[option]
        return f"reject {what} leaves {band}"
    h = float(threshold)
    if option == "seq_max_k2":
        return f"reject sequences holding a token with |log ratio| > {_bound(math.sqrt(2 * h))}"
    if option == "seq_max_k3":
        return f"reject sequences holding a token with e^ℓ − 1 − ℓ > {_bound(h)}"
    divergence = {"k2": "½ℓ²", "k3": "e^ℓ − 1 − ℓ"}[option[-2:]]
    if option.startswith("token"):
        return f"reject tokens with {divergence} > {_bound(h)}"
    how = "summed" if option.startswith("seq_sum") else "mean"
    return f"reject sequences whose {how} {divergence} exceeds {_bound(h)}"


def short_name(config: Mapping[str, Any], dialect: Dialect) -> str:
    """A few words naming the parts of a configuration.

    Example:
        >>> short_name({"rollout_is": "token", "rollout_is_threshold": 2.0,
        ...     "rollout_rs": "seq_mean_k1,seq_max_k2"}, "latest")
        'token TIS + seq_mean_k1 + seq_max_k2'
    """
    parts: list[str] = []
    level = config.get("rollout_is")
    if level in ("token", "sequence"):
        icepop = dialect == "latest" and _icepop_arguments(config.get("rollout_is_threshold"))
        parts.append(f"{level} {'IcePop' if icepop else 'TIS'}")
    rs = config.get("rollout_rs")
    if isinstance(rs, str) and rs.strip():
        if dialect == "latest":
            parts += [o.strip() for o in rs.split(",") if o.strip()]
        else:
            parts.append(f"{rs} RS")
    if config.get("rollout_token_veto_threshold") is not None:
        parts.append("veto")
    if config.get("bypass_mode") or config.get("bypass_old_logprob_for_rollout"):
        parts.append("bypass")
    return " + ".join(parts) or "metrics only"


def describe(config: Mapping[str, Any], dialect: Dialect) -> str:
    """The configuration in plain words.

    Example:
        >>> describe({"rollout_is": "token", "rollout_is_threshold": 2.0,
        ...     "rollout_rs": "seq_max_k2", "rollout_rs_threshold": 42.4}, "latest")
        'token-level truncated IS (C = 2); reject sequences holding a token with |log ratio| > 9.209'
    """
    parts: list[str] = []
    level = config.get("rollout_is")
    threshold = config.get("rollout_is_threshold")
    if level in ("token", "sequence"):
        icepop = _icepop_arguments(threshold) if dialect == "latest" else None
        if icepop is not None:
            parts.append(
                f"{level}-level IcePop (weights outside "
                f"[{_bound(icepop['threshold_lower'])}, {_bound(icepop['threshold'])}] zeroed)"
            )
        else:
            parts.append(f"{level}-level truncated IS (C = {_bound(float(threshold or 2.0))})")
    rs = config.get("rollout_rs")
    if isinstance(rs, str) and rs.strip():
        if dialect == "latest":
            options = [o.strip() for o in rs.split(",") if o.strip()]
            values = [v.strip() for v in str(config.get("rollout_rs_threshold")).split(",")]
            if len(values) == 1:
                values = values * len(options)
            parts += [_criterion_words(o, v) for o, v in zip(options, values, strict=False)]
        else:
            upper = float(config.get("rollout_rs_threshold") or 0.0)
            lower = config.get("rollout_rs_threshold_lower")
            low = float(lower) if lower is not None else (1.0 / upper if upper else 0.0)
            noun = {"token": "tokens whose ratio", "sequence": "sequences whose ratio ∏ρ"}.get(
                rs, "sequences whose geometric-mean ratio"
            )
            parts.append(f"reject {noun} leaves [{_bound(low)}, {_bound(upper)}]")
    veto = config.get("rollout_token_veto_threshold")
    if veto is not None:
        parts.append(f"reject sequences holding a token with π_train/π_rollout < {float(veto):g}")
    if config.get("bypass_mode") or config.get("bypass_old_logprob_for_rollout"):
        parts.append("bypass mode (rollout log-probs as π_old)")
    if (
        config.get("loss_type") == "reinforce"
        or config.get("use_policy_gradient")
        or config.get("use_pure_rollout_correction")
    ):
        parts.append("policy-gradient loss")
    if not parts:
        return "no correction: verl still logs the off-policy metrics"
    return "; ".join(parts)


def changed_keys(config: Mapping[str, Any], dialect: Dialect) -> dict[str, Any]:
    """The keys of ``config`` that differ from verl's defaults (the ``disabled`` preset), with
    ``rollout_is_threshold`` kept whenever IS weights are computed."""
    base = PRESETS[dialect]["disabled"].config
    return {
        k: v
        for k, v in config.items()
        if v != base.get(k, object())
        or (k == "rollout_is_threshold" and config.get("rollout_is") is not None)
    }


def _plain(value: Any) -> str:
    return scalar(value) if not isinstance(value, str) else value


def key_line(config: Mapping[str, Any], dialect: Dialect) -> str:
    """The configuration as verl keys on one line, the ones that differ from verl's defaults
    after the ``algorithm.rollout_correction.`` prefix (the ``disabled`` configuration: its
    ``rollout_is=null``).

    Example:
        >>> key_line({**PRESETS["latest"]["disabled"].config, "rollout_is": "token"}, "latest")
        'algorithm.rollout_correction.rollout_is=token rollout_is_threshold=2.0'
        >>> key_line(PRESETS["latest"]["disabled"].config, "latest")
        'algorithm.rollout_correction.rollout_is=null (every other key at its default)'
    """
    keys = changed_keys(config, dialect)
    if not keys:
        return "algorithm.rollout_correction.rollout_is=null (every other key at its default)"
    words = [f"{key}={_plain(value)}" for key, value in keys.items()]
    return f"algorithm.rollout_correction.{' '.join(words)}"
