"""Non-finite numbers in a document rcdiag reads: where the first one is, spelled as written (a
leaf: :mod:`rcdiag.io.documents` refuses such documents, :mod:`rcdiag.argument_checks` such
arguments)."""

from __future__ import annotations

import json
import math
import re
from collections.abc import Mapping
from typing import Any


class NonFinite(float):
    """A non-finite JSON constant as read (``Infinity``, ``-Infinity``, ``NaN``): a float that
    remembers its spelling."""

    token: str

    def __new__(cls, token: str) -> NonFinite:
        value = super().__new__(cls, token.replace("Infinity", "inf"))
        value.token = token
        return value


def described(value: float) -> str:
    if isinstance(value, NonFinite):
        return value.token
    if math.isnan(value):
        return "NaN"
    return "Infinity" if value > 0 else "-Infinity"


def nonfinite_field(document: Any) -> tuple[str, str] | None:
    """The first field holding a non-finite number (its path, ``overall."rollout_corr/ppl_ratio"`` or
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
                return where or "(the document)", described(value)
            continue
        if id(value) in seen:
            continue
        if isinstance(value, (Mapping, list, tuple)):
            seen.add(id(value))
        if isinstance(value, Mapping):
            items = [
                (f"{where}.{key_text(k)}" if where else key_text(k), v) for k, v in value.items()
            ]
            stack.extend(reversed(items))
        elif isinstance(value, (list, tuple)):
            stack.extend(reversed([(f"{where}[{i}]", v) for i, v in enumerate(value)]))
    return None


def key_text(key: Any) -> str:
    """A key as a path names it: bare when a plain word, else quoted with every control or
    non-ASCII character escaped (a key from a file reaches a terminal line)."""
    text = str(key)
    return text if re.fullmatch(r"[A-Za-z0-9_]+", text) else json.dumps(text)
