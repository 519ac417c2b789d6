"""Rollout-correction configurations: verl's keys, parsed and validated with verl's meaning (docs/presets.md).

A configuration is a mapping of verl's ``RolloutCorrectionConfig`` keys. :func:`parse_config` turns
it into a :class:`CorrectionPlan` (what to compute) or raises :class:`ConfigError` with the message
verl's error would carry, plus what is accepted. Nothing is validated at construction in verl either:
every check below is one verl runs when the helper executes.
"""

from __future__ import annotations

import difflib
import math
from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any, Literal

from rcdiag.dialects import Dialect
from rcdiag.errors import UsageError

ISLevel = Literal["token", "sequence"]
RSLevel = Literal["token", "sequence", "geometric"]

RS_OPTIONS: tuple[str, ...] = (
    "token_k1",
    "token_k2",
    "token_k3",
    "seq_sum_k1",
    "seq_sum_k2",
    "seq_sum_k3",
    "seq_mean_k1",
    "seq_mean_k2",
    "seq_mean_k3",
    "seq_max_k2",
    "seq_max_k3",
)
"""The 11 rejection criteria of the latest dialect (docs/correction.md); there is no ``seq_max_k1``."""

LEGACY_RS_LEVELS: tuple[str, ...] = ("token", "sequence", "geometric")

COMMON_KEYS: tuple[str, ...] = (
    "rollout_is",
    "rollout_is_threshold",
    "rollout_is_batch_normalize",
    "rollout_rs",
    "rollout_rs_threshold",
    "bypass_mode",
)
LATEST_ONLY_KEYS = ("loss_type",)
LEGACY_ONLY_KEYS = (
    "rollout_rs_threshold_lower",
    "rollout_token_veto_threshold",
    "use_policy_gradient",
    "bypass_old_logprob_for_rollout",
    "use_pure_rollout_correction",
)


class ConfigError(UsageError):
    """A configuration verl would reject; the message says what is wrong and what is accepted."""


@dataclass(frozen=True)
class ISPlan:
    """Importance sampling: level, and the band of applied weights.

    TIS (``icepop`` false): W = min(R, hi), with lo = 1/hi used by metrics only.
    IcePop: W = R if lo ≤ R ≤ hi else 0.
    """

    level: ISLevel
    lo: float
    hi: float
    icepop: bool
    batch_normalize: bool


@dataclass(frozen=True)
class Criterion:
    """A latest-dialect rejection criterion (docs/correction.md), bounds parsed (lo unused for k2/k3)."""

    option: str
    lo: float
    hi: float

    @property
    def divergence(self) -> str:
        return self.option[-2:]

    @property
    def aggregation(self) -> str:
        """``token``, ``sum``, ``mean`` or ``max``."""
        return "token" if self.option.startswith("token") else self.option.split("_")[1]


@dataclass(frozen=True)
class LegacyRejection:
    """Legacy (SEED) rejection on ρ itself: keep when lower ≤ ratio ≤ upper (docs/correction.md)."""

    level: RSLevel
    lower: float
    upper: float


@dataclass(frozen=True)
class CorrectionPlan:
    """What one configuration computes, parsed and validated for one dialect."""

    dialect: Dialect
    importance: ISPlan | None
    criteria: tuple[Criterion, ...] = ()
    legacy_rejection: LegacyRejection | None = None
    veto_threshold: float | None = None


def detect_dialect(config: Mapping[str, Any]) -> Dialect | None:
    """The dialect a configuration's keys and values imply, or None when they fit both (docs/presets.md).

    Raises:
        ConfigError: the configuration mixes keys of both dialects.
    """
    legacy = [k for k in LEGACY_ONLY_KEYS if k in config]
    rs = config.get("rollout_rs")
    if isinstance(rs, str) and rs.strip() in LEGACY_RS_LEVELS:
        legacy.append(f"rollout_rs: {rs.strip()}")
    latest = [k for k in LATEST_ONLY_KEYS if k in config]
    if isinstance(rs, str) and any(part.strip() in RS_OPTIONS for part in rs.split(",")):
        latest.append(f"rollout_rs: {rs.strip()}")
    threshold = config.get("rollout_is_threshold")
    if isinstance(threshold, str) and "_" in threshold:
        latest.append(f"rollout_is_threshold: {threshold!r}")
    if legacy and latest:
        raise ConfigError(
            f"configuration mixes the legacy dialect ({', '.join(legacy)}) with the latest one "
            f"({', '.join(latest)}); use the keys of one verl version"
        )
    if legacy:
        return "legacy"
    if latest:
        return "latest"
    return None


def _check_keys(config: Mapping[str, Any], dialect: Dialect) -> None:
    allowed = set(COMMON_KEYS) | set(LATEST_ONLY_KEYS if dialect == "latest" else LEGACY_ONLY_KEYS)
    for key in config:
        if key not in allowed:
            close = difflib.get_close_matches(key, sorted(allowed), n=1)
            hint = f"; did you mean {close[0]!r}?" if close else ""
            raise ConfigError(
                f"unknown rollout-correction key {key!r} for the {dialect} dialect{hint}"
            )


def _positive_float(value: Any, what: str) -> float:
    if isinstance(value, bool):
        raise ConfigError(f"{what} must be a number, not a bool ({value!r})")
    try:
        number = float(value)
    except (TypeError, ValueError):
        raise ConfigError(f"Invalid numeric threshold {value!r} for {what}") from None
    if math.isnan(number) or number <= 0:
        raise ConfigError(f"{what} must be a positive number, got {value!r}")
    return number


def _legacy_number(value: Any, what: str, *, allow_zero: bool = False) -> float:
    """A SEED-era threshold: a number only (SEED's fields were floats), > 0 (or ≥ 0)."""
    if isinstance(value, bool) or not isinstance(value, (int, float)):
        raise ConfigError(f"{what} must be a number in the legacy dialect, got {value!r}")
    number = float(value)
    if math.isnan(number) or number < 0 or (number == 0 and not allow_zero):
        bound = "≥ 0" if allow_zero else "> 0"
        raise ConfigError(f"{what} must be {bound}, got {value!r}")
    return number


BOOL_KEYS = (
    "rollout_is_batch_normalize",
    "bypass_mode",
    "use_policy_gradient",
    "bypass_old_logprob_for_rollout",
    "use_pure_rollout_correction",
)
LOSS_TYPES = ("ppo_clip", "reinforce")


def _check_values(config: Mapping[str, Any]) -> None:
    for key in BOOL_KEYS:
        if key in config and not isinstance(config[key], bool):
            raise ConfigError(f"{key} must be true or false, got {config[key]!r}")
    if "loss_type" in config and config["loss_type"] not in LOSS_TYPES:
        raise ConfigError(
            f"Invalid loss_type {config['loss_type']!r}: expected one of {', '.join(LOSS_TYPES)}"
        )


def parse_is_threshold(value: Any, dialect: Dialect) -> tuple[float, float, bool]:
    """(lo, hi, icepop) from ``rollout_is_threshold`` (docs/correction.md).

    Latest: a number C → TIS (lo = 1/C); a string "C" → TIS; "lo_hi" → IcePop. Legacy: a number only.
    """
    if isinstance(value, bool):
        raise ConfigError(
            f"rollout_is_threshold must be a number or a 'lo_hi' string, not a bool ({value!r})"
        )
    if isinstance(value, (int, float)):
        hi = float(value)
        if not hi > 0:
            raise ConfigError(f"rollout_is_threshold must be > 0, got {value!r}")
        return 1.0 / hi, hi, False
    if dialect == "legacy" or not isinstance(value, str):
        accepted = "a positive number" if dialect == "legacy" else "a number or 'lo_hi' string"
        raise ConfigError(f"Invalid rollout_is_threshold {value!r}: expected {accepted}")
    text = value.strip()
    if not text:
        raise ConfigError("Invalid rollout_is_threshold '': empty string")
    if "_" in text:
        lo_text, hi_text = text.split("_", 1)
        try:
            lo, hi = float(lo_text), float(hi_text)
        except ValueError:
            raise ConfigError(
                f"Invalid rollout_is_threshold {value!r}: expected 'lo_hi' with two numbers"
            ) from None
        if not hi > 0 or not lo > 0:
            raise ConfigError(f"rollout_is_threshold {value!r}: both bounds must be > 0")
        if lo > hi:
            raise ConfigError(f"rollout_is_threshold {value!r}: lower bound exceeds upper bound")
        return lo, hi, True
    try:
        hi = float(text)
    except ValueError:
        raise ConfigError(
            f"Invalid rollout_is_threshold {value!r}: expected a number or 'lo_hi'"
        ) from None
    if not hi > 0:
        raise ConfigError(f"rollout_is_threshold must be > 0, got {value!r}")
    return 1.0 / hi, hi, False


def parse_criteria(rollout_rs: Any, threshold: Any) -> tuple[Criterion, ...]:
    """The latest dialect's comma lists of criteria and thresholds (docs/correction.md)."""
    if not isinstance(rollout_rs, str):
        raise ConfigError(
            f"rollout_rs must be a string such as 'token_k1,seq_max_k2', got {rollout_rs!r}"
        )
    options = list(dict.fromkeys(p.strip() for p in rollout_rs.split(",") if p.strip()))
    if not options:
        raise ConfigError(f"rollout_rs {rollout_rs!r} names no criterion")
    for option in options:
        if option not in RS_OPTIONS:
            close = difflib.get_close_matches(option, RS_OPTIONS, n=1)
            hint = f" (did you mean {close[0]!r}?)" if close else ""
            raise ConfigError(
                f"Invalid rollout_rs option {option!r}{hint}; expected one of {', '.join(RS_OPTIONS)}"
            )
    if threshold is None:
        raise ConfigError(f"rollout_rs {rollout_rs!r} needs rollout_rs_threshold (it is null)")
    if isinstance(threshold, (int, float)):
        threshold = str(threshold)
    if not isinstance(threshold, str):
        raise ConfigError(
            f"rollout_rs_threshold must be a number or a string, got {type(threshold).__name__}"
        )
    items = [p.strip() for p in threshold.split(",") if p.strip()]
    if not items:
        raise ConfigError(f"rollout_rs_threshold {threshold!r} holds no value")
    if len(items) not in (1, len(options)):
        raise ConfigError(
            f"rollout_rs_threshold has {len(items)} values for {len(options)} criteria "
            f"({', '.join(options)}); give one value for all or one per criterion"
        )
    if len(items) == 1:
        items = items * len(options)
    criteria = []
    for option, item in zip(options, items, strict=True):
        what = f"rollout_rs_threshold of {option}"
        if option.endswith("k1"):
            if "_" in item:
                lo_text, hi_text = item.split("_", 1)
                lo, hi = _positive_float(lo_text, what), _positive_float(hi_text, what)
                if lo > hi:
                    raise ConfigError(f"{what} {item!r}: lower bound exceeds upper bound")
            else:  # a single x means [1/x, x]: x < 1 makes an empty band
                hi = _positive_float(item, what)
                lo = 1.0 / hi
                if lo > hi:
                    raise ConfigError(
                        f"{what} {item!r} means the band [{lo:g}, {hi:g}]: lower bound exceeds "
                        "upper bound (a single value must be ≥ 1)"
                    )
        else:
            if "_" in item:
                raise ConfigError(
                    f"{what} {item!r}: k2/k3 criteria take a single upper bound, not 'lo_hi'"
                )
            lo, hi = 0.0, _positive_float(item, what)
        criteria.append(Criterion(option, lo, hi))
    return tuple(criteria)


def parse_config(config: Mapping[str, Any], dialect: Dialect) -> CorrectionPlan:
    """Validate ``config`` as verl's helper would and return what it computes.

    Raises:
        ConfigError: for every configuration verl rejects (docs/presets.md), and for unknown keys.
    """
    _check_keys(config, dialect)
    _check_values(config)
    level = config.get("rollout_is")
    importance = None
    threshold = config.get("rollout_is_threshold", 2.0)
    if level is not None and threshold is not None:  # verl checks the level only here, too
        if level not in ("token", "sequence"):
            raise ConfigError(f"Invalid rollout_is {level!r}: expected 'token', 'sequence' or null")
        lo, hi, icepop = parse_is_threshold(threshold, dialect)
        importance = ISPlan(
            level, lo, hi, icepop, bool(config.get("rollout_is_batch_normalize", False))
        )
    rs = config.get("rollout_rs")
    rs_threshold = config.get("rollout_rs_threshold")
    if dialect == "latest":
        criteria = parse_criteria(rs, rs_threshold) if rs is not None else ()
        return CorrectionPlan(dialect, importance, criteria=criteria)
    legacy_rejection = None
    if rs is not None:
        if rs not in LEGACY_RS_LEVELS:
            raise ConfigError(
                f"Invalid rollout_rs {rs!r}: the legacy dialect accepts "
                f"{', '.join(LEGACY_RS_LEVELS)} (k1/k2/k3 criteria need --dialect latest)"
            )
        if rs_threshold is None:
            raise ConfigError(f"rollout_rs {rs!r} needs rollout_rs_threshold (it is null)")
        upper = _legacy_number(rs_threshold, "rollout_rs_threshold")
        lower_value = config.get("rollout_rs_threshold_lower")
        lower = (
            1.0 / upper
            if lower_value is None
            else _legacy_number(lower_value, "rollout_rs_threshold_lower", allow_zero=True)
        )
        legacy_rejection = LegacyRejection(rs, lower, upper)
    veto = config.get("rollout_token_veto_threshold")
    return CorrectionPlan(
        dialect,
        importance,
        legacy_rejection=legacy_rejection,
        veto_threshold=None
        if veto is None
        else _legacy_number(veto, "rollout_token_veto_threshold"),
    )
