"""The one status vocabulary of every judgement rcdiag makes (a leaf: imports nothing of rcdiag).

* ``healthy`` — inside every published range;
* ``watch`` — past a range that calls for attention (verl's documentation "warns"), not for a change;
* ``act`` — past a range that calls for a fix or a correction (verl's "severe", another framework's
  CI gate).
"""

from __future__ import annotations

from collections.abc import Iterable
from typing import Literal

Status = Literal["healthy", "watch", "act"]
"""How bad a value, a cause or a dump is (module docstring)."""
STATUSES: tuple[Status, ...] = ("healthy", "watch", "act")

_RANK: dict[str, int] = {s: i for i, s in enumerate(STATUSES)}


def rank(status: Status) -> int:
    """0 for healthy, 1 for watch, 2 for act."""
    return _RANK[status]


def worst(statuses: Iterable[Status | None]) -> Status:
    """The most severe status (``healthy`` for none).

    Example:
        >>> worst(["healthy", None, "watch"]), worst([])
        ('watch', 'healthy')
    """
    found: Status = "healthy"
    for status in statuses:
        if status is not None and _RANK[status] > _RANK[found]:
            found = status
    return found
