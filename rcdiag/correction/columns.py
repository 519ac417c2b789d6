"""Figures of a comparison at every step at once: named float64 rows with where each is defined
(:class:`Columns`), built from what formulas return over arrays of steps (docs/correction.md,
"Streaming")."""

from __future__ import annotations

import math
from collections.abc import Iterator, Mapping
from typing import Any, NamedTuple

import numpy as np

from rcdiag.correction.engine import Getter
from rcdiag.metrics.ragged import F64, Bool


class Columns(NamedTuple):
    """Named figures at a set of points (the steps in increasing order, or the whole dump): one
    float64 row per name, and where each value is defined (None in a document where not)."""

    names: tuple[str, ...]
    values: F64
    defined: Bool

    def point(self, j: int) -> dict[str, float | None]:
        """The figures at point ``j`` (None where undefined)."""
        values, defined = self.values[:, j].tolist(), self.defined[:, j].tolist()
        return {n: v if d else None for n, v, d in zip(self.names, values, defined, strict=True)}


class Partial(NamedTuple):
    """A figure defined at some points only (``defined``), with its value there."""

    value: Any
    defined: Any


class GetterMapping(Mapping[str, Any]):
    """A getter read as a mapping (for formulas that take the summed statistics by name)."""

    def __init__(self, get: Getter) -> None:
        self._get = get

    def __getitem__(self, name: str) -> Any:
        return self._get(name)

    def __iter__(self) -> Iterator[str]:
        raise TypeError("statistics are read by name")

    def __len__(self) -> int:
        raise TypeError("statistics are read by name")


def as_column(value: Any, size: int) -> tuple[F64, Bool]:
    """A figure as a float64 array of ``size`` points and where it is defined: from an array, a
    number (the same at every point), None (nowhere), a :class:`Partial`, or a list of numbers or
    None (one per point)."""
    if isinstance(value, Partial):
        values, _ = as_column(value.value, size)
        return values, np.broadcast_to(np.asarray(value.defined, dtype=bool), (size,))
    if value is None:
        return np.full(size, math.nan), np.zeros(size, dtype=bool)
    if isinstance(value, list):
        defined = np.array([v is not None for v in value], dtype=bool)
        values = np.array([math.nan if v is None else v for v in value], dtype=np.float64)
        return values, defined
    values = np.broadcast_to(np.asarray(value, dtype=np.float64), (size,))
    return values, np.ones(size, dtype=bool)


def stack_columns(figures: Mapping[str, tuple[F64, Bool]], present: Bool) -> Columns:
    """The figures as one matrix, undefined at the points outside ``present``."""
    names = tuple(figures)
    size = present.size
    values = np.empty((len(names), size))
    defined = np.empty((len(names), size), dtype=bool)
    for i, (column, where) in enumerate(figures.values()):
        values[i] = column
        np.logical_and(where, present, out=defined[i])
    return Columns(names, values, defined)
