"""Sufficient statistics kept per group (training step), merged exactly into an overall total.

Every metric rcdiag streams is a function of sums, maxima and minima over rows or tokens. Keeping those
per step lets one pass give both the per-step values and the overall value (the whole dump as one batch)
from the same finalising formula, so the math exists once.
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping
from typing import Literal

import numpy as np

from rcdiag.metrics.ragged import F64, I64

Kind = Literal["sum", "max", "min"]

_IDENTITY: dict[Kind, float] = {"sum": 0.0, "max": -np.inf, "min": np.inf}


class GroupedStats:
    """Named statistics, one value per group, each combined by ``sum``, ``max`` or ``min``.

    Example:
        >>> g = GroupedStats({"n": "sum", "hi": "max"})
        >>> slots = g.slots_for(np.array([7, 7, 3]))
        >>> g.add(slots, {"n": np.array([1.0, 2.0, 4.0]), "hi": np.array([0.5, 2.5, 1.0])})
        >>> g.keys(), g.group(7), g.total()
        ([3, 7], {'n': 3.0, 'hi': 2.5}, {'n': 7.0, 'hi': 2.5})
    """

    def __init__(self, kinds: Mapping[str, Kind]) -> None:
        self.kinds: dict[str, Kind] = dict(kinds)
        self._slot_of: dict[int, int] = {}
        self._key_of: list[int] = []
        self._data: dict[str, F64] = {name: np.empty(0) for name in self.kinds}

    def slots_for(self, keys: I64) -> I64:
        """Slot index of each row's group key, creating slots for keys not seen before."""
        unique, inverse = np.unique(keys, return_inverse=True)
        slot_of_unique = np.empty(unique.size, dtype=np.int64)
        for j, key in enumerate(unique.tolist()):
            slot = self._slot_of.get(key)
            if slot is None:
                slot = self._slot_of[key] = len(self._key_of)
                self._key_of.append(key)
            slot_of_unique[j] = slot
        self._grow(len(self._slot_of))
        return slot_of_unique[inverse.reshape(-1)]

    def _grow(self, n: int) -> None:
        for name, arr in self._data.items():
            if arr.size < n:
                grown = np.full(max(n, 2 * arr.size), _IDENTITY[self.kinds[name]])
                grown[: arr.size] = arr
                self._data[name] = grown

    def add(self, slots: I64, values: Mapping[str, F64]) -> None:
        """Fold one value per row into the row's group for every named statistic."""
        for name, kind in self.kinds.items():
            arr, vals = self._data[name], values[name]
            if kind == "sum":
                arr[: len(self._slot_of)] += np.bincount(
                    slots, weights=vals, minlength=len(self._slot_of)
                )
            elif kind == "max":
                np.maximum.at(arr, slots, vals)
            else:
                np.minimum.at(arr, slots, vals)

    def keys_of_slots(self, slots: I64) -> list[int]:
        """The group key of each slot."""
        return [self._key_of[s] for s in slots.tolist()]

    def keys(self) -> list[int]:
        """Group keys seen so far, sorted."""
        return sorted(self._slot_of)

    def group(self, key: int) -> dict[str, float]:
        """The statistics of one group."""
        slot = self._slot_of[key]
        return {name: float(arr[slot]) for name, arr in self._data.items()}

    def total(self, keys: Iterable[int] | None = None) -> dict[str, float]:
        """The statistics of the union of the given groups (default: all of them)."""
        chosen = self.keys() if keys is None else list(keys)
        slots = np.array([self._slot_of[k] for k in chosen], dtype=np.int64)
        out: dict[str, float] = {}
        for name, arr in self._data.items():
            kind = self.kinds[name]
            picked = arr[slots]
            if picked.size == 0:
                out[name] = _IDENTITY[kind]
            elif kind == "sum":
                out[name] = float(picked.sum())
            elif kind == "max":
                out[name] = float(picked.max())
            else:
                out[name] = float(picked.min())
        return out
