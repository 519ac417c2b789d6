"""The mechanisms of a verl configuration and the shape of a framework's translation table
(:mod:`rcdiag.frameworks.translate`: the tables and :func:`~rcdiag.frameworks.translate.translate`)."""

from __future__ import annotations

import math
from collections.abc import Callable, Mapping
from dataclasses import dataclass
from typing import Any

from rcdiag.correction.config import CorrectionPlan


@dataclass(frozen=True)
class Part:
    """One mechanism of a verl configuration.

    ``kind``: ``is`` (``level``, ``icepop``, ``lo``, ``hi``), ``criterion`` (``option``; ``lo``,
    ``hi`` as verl parses them), ``legacy_rs`` (``level``; keep ``lo`` ≤ ratio ≤ ``hi``), ``veto``
    (``hi`` = τ) or ``batch_norm``.
    """

    kind: str
    level: str = ""
    option: str = ""
    icepop: bool = False
    lo: float = 0.0
    hi: float = math.inf


def parts(plan: CorrectionPlan) -> list[Part]:
    """The mechanisms of a parsed verl configuration, IS first."""
    out: list[Part] = []
    if plan.importance is not None:
        imp = plan.importance
        out.append(Part("is", level=imp.level, icepop=imp.icepop, lo=imp.lo, hi=imp.hi))
        if imp.batch_normalize:
            out.append(Part("batch_norm", level=imp.level))
    out += [Part("criterion", option=c.option, lo=c.lo, hi=c.hi) for c in plan.criteria]
    if plan.legacy_rejection is not None:
        rule = plan.legacy_rejection
        out.append(Part("legacy_rs", level=rule.level, lo=rule.lower, hi=rule.upper))
    if plan.veto_threshold is not None:
        out.append(Part("veto", hi=plan.veto_threshold))
    return out


def ratio_band(part: Part) -> tuple[float, float]:
    """The band on π_train/π_rollout a k1 criterion keeps: [1/hi, 1/lo] (docs/correction.md)."""
    return 1.0 / part.hi, (math.inf if part.lo == 0 else 1.0 / part.lo)


@dataclass(frozen=True)
class Entry:
    """What a framework's table says for one mechanism: the keys it sets, whether the math is the
    same, and a note (what differs, or that the framework lacks it)."""

    keys: Mapping[str, Any]
    exact: bool
    note: str | None = None


Table = Mapping[str, Callable[[Part], Entry]]
"""A framework's table: mechanism name (:func:`mechanism`) → its entry."""


def mechanism(part: Part) -> str:
    """The table key of a mechanism: ``token_tis``, ``sequence_icepop``, ``seq_mean_k1``, …"""
    if part.kind == "is":
        return f"{part.level}_{'icepop' if part.icepop else 'tis'}"
    if part.kind == "criterion":
        return part.option
    if part.kind == "legacy_rs":
        return f"legacy_{part.level}_rs"
    return part.kind


def lacking(title: str, what: str, closest: str = "left out") -> Callable[[Part], Entry]:
    return lambda part: Entry({}, False, f"{title} has no {what}: {closest}.")


Finish = Callable[[dict[str, Any]], tuple[dict[str, Any], list[str], bool]]


@dataclass(frozen=True)
class Translator:
    table: Table
    default: Callable[[Part], Entry]
    render: Callable[[Mapping[str, Any]], str]
    finish: Finish | None = None


def yaml_scalar(value: Any) -> str:
    """A scalar as PyYAML's safe_load reads it back with its type: a float always with a dot and
    a signed exponent (``1.0e-10``; ``1e-10`` would be read as a string), None as null."""
    if value is None:
        return "null"
    if isinstance(value, bool):
        return "true" if value else "false"
    if isinstance(value, str):
        return f'"{value}"'
    if isinstance(value, float):
        if math.isinf(value):
            return ".inf" if value > 0 else "-.inf"
        text = repr(value)
        if "e" not in text:
            return text
        mantissa, exponent = text.split("e")
        mantissa = mantissa if "." in mantissa else f"{mantissa}.0"
        exponent = exponent if exponent[0] in "+-" else f"+{exponent}"
        return f"{mantissa}e{exponent}"
    return str(value)
