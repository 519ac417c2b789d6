"""Documents rcdiag reads (baselines, results JSON, rules files, configurations): no non-finite
number gets in.

rcdiag writes a non-finite value as ``null``; a number that is ``Infinity`` or ``NaN`` in a document
it reads (JSON's ``Infinity``/``NaN`` tokens, an exponent too large for a float, TOML's ``inf``/``nan``,
YAML's ``.inf``/``.nan``) would switch a gate off or draw nonsense, so it is refused with the field
named.
"""

from __future__ import annotations

import json
import math
import re
from collections.abc import Mapping
from typing import Any

from rcdiag.errors import UsageError
from rcdiag.io.paths import printable


class _NonFinite(float):
    """A non-finite JSON constant as read (``Infinity``, ``-Infinity``, ``NaN``): a float that
    remembers its spelling."""

    token: str

    def __new__(cls, token: str) -> _NonFinite:
        value = super().__new__(cls, token.replace("Infinity", "inf"))
        value.token = token
        return value


_MAY_OVERFLOW = re.compile(r"[eE][+]?0*[0-9]{3,}|[0-9]{300,}")
"""Text where a JSON number may overflow a float (``1e999``): only then are the numbers walked."""


def _described(value: float) -> str:
    if isinstance(value, _NonFinite):
        return value.token
    if math.isnan(value):
        return "NaN"
    return "Infinity" if value > 0 else "-Infinity"


def nonfinite_field(document: Any) -> tuple[str, str] | None:
    """The first field holding a non-finite number (its path, ``overall."rollout_corr/k3_kl"`` or
    ``steps[3].kl``, and the value as written), or None; walks without recursion, each container once.

    Example:
        >>> nonfinite_field({"a": [1.0, {"b": float("inf")}]})
        ('a[1].b', 'Infinity')
    """
    stack: list[tuple[str, Any]] = [("", document)]
    seen: set[int] = set()  # YAML aliases share (or nest) containers: each is walked once
    while stack:
        where, value = stack.pop()
        if isinstance(value, float):
            if not math.isfinite(value):
                return where or "(the document)", _described(value)
            continue
        if id(value) in seen:
            continue
        if isinstance(value, (Mapping, list, tuple)):
            seen.add(id(value))
        if isinstance(value, Mapping):
            items = [(f"{where}.{_key(k)}" if where else _key(k), v) for k, v in value.items()]
            stack.extend(reversed(items))
        elif isinstance(value, (list, tuple)):
            stack.extend(reversed([(f"{where}[{i}]", v) for i, v in enumerate(value)]))
    return None


def _key(key: Any) -> str:
    text = printable(str(key))
    return text if re.fullmatch(r"[A-Za-z0-9_]+", text) else json.dumps(text, ensure_ascii=False)


def refuse_nonfinite(document: Any, origin: str) -> None:
    """Raise when ``document`` (parsed from ``origin``) holds a non-finite number.

    Raises:
        UsageError: naming the file and the field.
    """
    found = nonfinite_field(document)
    if found is not None:
        where, value = found
        raise UsageError(
            f"{origin}: field {where} is {value}; rcdiag reads finite numbers only (a value that "
            "cannot be computed is written as null)"
        )


def loads_json(text: str, origin: str) -> Any:
    """``json.loads`` of a document rcdiag reads, refusing non-finite numbers.

    Raises:
        json.JSONDecodeError, RecursionError: as ``json.loads``.
        UsageError: a non-finite number, naming ``origin`` and the field.
    """
    constants: list[str] = []

    def constant(token: str) -> float:
        constants.append(token)
        return _NonFinite(token)

    document = json.loads(text, parse_constant=constant)
    if constants or _MAY_OVERFLOW.search(text):
        refuse_nonfinite(document, origin)
    return document
