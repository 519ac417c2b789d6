"""Sufficient statistics kept per group (training step), merged exactly into an overall total.

Every metric rcdiag streams is a function of sums, maxima, minima and moments over rows or tokens.
Keeping those per step lets one pass give both the per-step values and the overall value (the whole
dump as one batch) from the same finalising formula, so the math exists once.
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping
from typing import Literal, NamedTuple

import numpy as np

from rcdiag.metrics.ragged import F64, I64

Kind = Literal["sum", "max", "min", "moments"]

_IDENTITY: dict[str, float] = {"sum": 0.0, "max": -np.inf, "min": np.inf}


class Moments(NamedTuple):
    """Count, mean and sum of squared deviations (M2) of a set of values, one entry per row or group.

    Kept instead of Σx and Σx² so that a variance never suffers cancellation against the mean.
    """

    n: F64
    mean: F64
    m2: F64


def merge_moments(slots: I64, parts: Moments, size: int) -> Moments:
    """Chan et al.'s exact parallel combination of ``parts`` into ``size`` groups by ``slots``."""
    n = np.bincount(slots, weights=parts.n, minlength=size).astype(np.float64)
    total = np.bincount(slots, weights=parts.n * parts.mean, minlength=size)
    mean = np.divide(total, n, out=np.zeros(size), where=n > 0)
    spread = parts.n * (parts.mean - mean[slots]) ** 2
    m2 = np.bincount(slots, weights=parts.m2 + spread, minlength=size).astype(np.float64)
    return Moments(n, mean, m2)


def _combine(a: Moments, b: Moments) -> Moments:
    n = a.n + b.n
    safe = np.where(n > 0, n, 1.0)
    delta = b.mean - a.mean
    mean = a.mean + delta * np.where(n > 0, b.n / safe, 0.0)
    m2 = a.m2 + b.m2 + delta**2 * a.n * b.n / safe
    return Moments(n, mean, m2)


class GroupIndex:
    """Group key → slot, shared by the :class:`GroupedStats` that see the same batches (every
    component of a comparison), so each batch's keys are looked up once, not once per statistic.

    The last keys and slots asked are answered again without work when the same arrays come back
    (held here, so their identity cannot be reused); arrays handed in must not change afterwards.
    """

    def __init__(self) -> None:
        self.slot_of: dict[int, int] = {}
        self.key_of: list[int] = []
        # (keys, slots) and (slots, groups) of the last calls: rows and runs of one batch
        self._slots: list[tuple[I64, I64]] = []
        self._groups: list[tuple[I64, tuple[I64, I64, tuple[I64 | None, I64]]]] = []

    def slots_for(self, keys: I64) -> I64:
        """Slot index of each row's group key, creating slots for keys not seen before."""
        for seen, slots in self._slots:
            if seen is keys:
                return slots
        unique, inverse = np.unique(keys, return_inverse=True)
        slot_of_unique = np.empty(unique.size, dtype=np.int64)
        for j, key in enumerate(unique.tolist()):
            slot = self.slot_of.get(key)
            if slot is None:
                slot = self.slot_of[key] = len(self.key_of)
                self.key_of.append(key)
            slot_of_unique[j] = slot
        slots = slot_of_unique[inverse.reshape(-1)]
        self._slots = [*self._slots[-(_REMEMBERED - 1) :], (keys, slots)]
        return slots

    def groups_of(self, slots: I64) -> tuple[I64, I64]:
        """The distinct slots of ``slots`` and each row's index among them."""
        present, local, _ = self._grouping(slots)
        return present, local

    def group_reduce(self, slots: I64, columns: list[F64], ufunc: np.ufunc = np.add) -> F64:
        """``ufunc`` (``np.add``: Σ; ``np.maximum``, ``np.minimum``) of each column over the rows of
        each group of :meth:`groups_of`, shape (columns, groups); every column reduced in one call,
        each group in row order (as ``np.bincount`` sums)."""
        present, _, (order, starts) = self._grouping(slots)
        stacked = np.stack(columns).astype(np.float64, copy=False)  # flags count as 0.0 / 1.0
        if order is not None:
            stacked = stacked[:, order]
        if stacked.shape[1] == 0:
            return np.full((len(columns), present.size), ufunc.identity or 0.0)
        return ufunc.reduceat(stacked, starts, axis=1)

    def _grouping(self, slots: I64) -> tuple[I64, I64, tuple[I64 | None, I64]]:
        """``groups_of``, and the row order that makes each group contiguous (None: already in
        order) with each group's first position in it."""
        for seen, grouping in self._groups:
            if seen is slots:
                return grouping
        present, local = np.unique(slots, return_inverse=True)
        local = local.reshape(-1)
        if local.size < 2 or bool((local[1:] >= local[:-1]).all()):
            order = None
            ordered = local
        else:
            order = np.argsort(local, kind="stable")
            ordered = local[order]
        starts = (
            np.flatnonzero(np.r_[True, ordered[1:] != ordered[:-1]]) if ordered.size else ordered
        )
        grouping = (present, local, (order, starts))
        self._groups = [*self._groups[-(_REMEMBERED - 1) :], (slots, grouping)]
        return grouping


_REMEMBERED = 4
"""How many recent key arrays :class:`GroupIndex` answers again without work."""


_FOLD: dict[str, np.ufunc] = {"sum": np.add, "max": np.maximum, "min": np.minimum}
"""How each kind of statistic folds a batch's values into its groups."""


def add_all(additions: Iterable[tuple[GroupedStats, I64, Mapping[str, F64 | Moments]]]) -> None:
    """:meth:`GroupedStats.add` for several statistics at once: the sums (and the maxima, and the
    minima) of every addition over the same rows (the same ``slots`` array of the same
    :class:`GroupIndex`) are reduced in one call, so a batch costs a few reductions however many
    statistics (configurations) see it."""
    Targets = list[tuple[dict[str, F64], str]]
    pending: dict[tuple[int, int, str], tuple[GroupIndex, I64, Targets, list[F64]]] = {}
    for stats, slots, values in additions:
        for name in stats._add_moments(slots, values):
            column = values[name]
            assert not isinstance(column, Moments)
            key = (id(stats.index), id(slots), stats.kinds[name])
            entry = pending.setdefault(key, (stats.index, slots, [], []))
            entry[2].append((stats._data, name))
            entry[3].append(column)
    for (_index, _slots, kind), (index, slots, targets, columns) in pending.items():
        present = index.groups_of(slots)[0]
        fold = _FOLD[kind]
        with np.errstate(invalid="ignore"):  # a NaN value (∞ − ∞) makes the extreme NaN
            reduced = index.group_reduce(slots, columns, fold)
            if present.size == 1:  # one group (a step, or the whole dump): scalar updates
                slot = int(present[0])
                for (data, name), value in zip(targets, reduced[:, 0].tolist(), strict=True):
                    data[name][slot] = fold(data[name][slot], value)
            else:
                for (data, name), row in zip(targets, reduced, strict=True):
                    data[name][present] = fold(data[name][present], row)


class GroupedStats:
    """Named statistics, one value per group, combined by ``sum``, ``max``, ``min`` or ``moments``.

    A ``moments`` statistic takes :class:`Moments` per row and reads back as three entries,
    ``name.n``, ``name.mean`` and ``name.m2``.

    Example:
        >>> g = GroupedStats({"n": "sum", "hi": "max"})
        >>> slots = g.slots_for(np.array([7, 7, 3]))
        >>> g.add(slots, {"n": np.array([1.0, 2.0, 4.0]), "hi": np.array([0.5, 2.5, 1.0])})
        >>> g.keys(), g.group(7), g.total()
        ([3, 7], {'n': 3.0, 'hi': 2.5}, {'n': 7.0, 'hi': 2.5})
    """

    def __init__(self, kinds: Mapping[str, Kind], index: GroupIndex | None = None) -> None:
        self.kinds: dict[str, Kind] = dict(kinds)
        self.index = index or GroupIndex()
        self._data: dict[str, F64] = {}
        self._moments: dict[str, Moments] = {}
        for name, kind in self.kinds.items():
            if kind == "moments":
                self._moments[name] = Moments(np.empty(0), np.empty(0), np.empty(0))
            else:
                self._data[name] = np.empty(0)

    @property
    def _slot_of(self) -> dict[int, int]:
        return self.index.slot_of

    @property
    def _key_of(self) -> list[int]:
        return self.index.key_of

    def slots_for(self, keys: I64) -> I64:
        """Slot index of each row's group key, creating slots for keys not seen before."""
        return self.index.slots_for(keys)

    def _grow(self, n: int) -> None:
        """Room for ``n`` groups in every array (doubling, so that adding groups one batch at a
        time costs linear time in all)."""
        arrays = self._data.values() or (m.n for m in self._moments.values())
        held = next(iter(arrays), np.empty(0)).size  # every array holds as many groups
        if n <= held:
            return
        size = max(n, 2 * held)
        for name, arr in self._data.items():
            grown = np.full(size, _IDENTITY[self.kinds[name]])
            grown[: arr.size] = arr
            self._data[name] = grown
        for name, m in self._moments.items():
            self._moments[name] = Moments(
                *(np.concatenate([part, np.zeros(size - part.size)]) for part in m)
            )

    def add(self, slots: I64, values: Mapping[str, F64 | Moments]) -> None:
        """Fold one value per row into the row's group for each statistic in ``values`` (all of
        them, or a part: statistics kept at different granularities are added separately).

        Touches only the groups present in ``slots``: cost in the batch's rows, not in all groups.
        """
        add_all([(self, slots, values)])

    def _add_moments(self, slots: I64, values: Mapping[str, F64 | Moments]) -> list[str]:
        """Fold the moments of ``values``; the names of its other statistics, left to fold."""
        self._grow(len(self._key_of))
        others: list[str] = []
        for name, vals in values.items():
            if not isinstance(vals, Moments):
                others.append(name)
                continue
            present, local = self.index.groups_of(slots)
            have = self._moments[name]
            merged = _combine(
                Moments(*(part[present] for part in have)),
                merge_moments(local, vals, present.size),
            )
            for part, new in zip(have, merged, strict=True):
                part[present] = new
        return others

    def merge(self, other: GroupedStats) -> None:
        """Fold in the groups of ``other`` (the same statistics, gathered from other rows): sums
        add, extremes compare, moments combine exactly; a group in both gets both."""
        if other.kinds != self.kinds:
            raise ValueError("cannot merge statistics of different kinds")
        size = len(other._key_of)
        if size == 0:
            return
        keys = np.asarray(other._key_of, dtype=np.int64)
        values: dict[str, F64 | Moments] = {name: arr[:size] for name, arr in other._data.items()}
        for name, m in other._moments.items():
            values[name] = Moments(*(part[:size] for part in m))
        self.add(self.index.slots_for(keys), values)

    def keys_of_slots(self, slots: I64) -> list[int]:
        """The group key of each slot."""
        return [self._key_of[s] for s in slots.tolist()]

    def keys(self) -> list[int]:
        """Group keys seen so far, sorted."""
        return sorted(self._slot_of)

    def group(self, key: int) -> dict[str, float]:
        """The statistics of one group (constant time: one read per statistic)."""
        self._grow(len(self._key_of))  # groups another user of the index added
        slot = self._slot_of[key]
        out = {name: float(arr[slot]) for name, arr in self._data.items()}
        for name, m in self._moments.items():
            for part, suffix in zip(m, (".n", ".mean", ".m2"), strict=True):
                out[name + suffix] = float(part[slot])
        return out

    def groups(self) -> dict[int, dict[str, float]]:
        """The statistics of every group, keyed by group (converted in one sweep per statistic)."""
        self._grow(len(self._key_of))  # groups another user of the index added
        size = len(self._key_of)
        columns: dict[str, list[float]] = {
            name: arr[:size].tolist() for name, arr in self._data.items()
        }
        for name, m in self._moments.items():
            for part, suffix in zip(m, (".n", ".mean", ".m2"), strict=True):
                columns[name + suffix] = part[:size].tolist()
        return {
            key: {name: values[slot] for name, values in columns.items()}
            for slot, key in enumerate(self._key_of)
        }

    def matrix(self) -> tuple[list[str], F64]:
        """Every statistic's name (a moments statistic as its three entries) and their values, one
        row per statistic and one column per slot (:meth:`slots_for`): the groups' values at
        8 bytes each, where :meth:`groups` holds a Python dictionary per group."""
        self._grow(len(self._key_of))  # groups another user of the index added
        size = len(self._key_of)
        names = list(self._data)
        rows = [arr[:size] for arr in self._data.values()]
        for name, m in self._moments.items():
            names += [name + suffix for suffix in (".n", ".mean", ".m2")]
            rows += [part[:size] for part in m]
        return names, np.array(rows, dtype=np.float64).reshape(len(names), size)

    def column(self, name: str) -> tuple[I64, F64]:
        """Every group's value of one sum, max or min statistic: (keys, values), sorted by key."""
        self._grow(len(self._key_of))  # groups another user of the index added
        slots = self._slots_by_key()
        return np.asarray(self._key_of, dtype=np.int64)[slots], self._data[name][slots]

    def _slots_by_key(self) -> I64:
        """Every slot, in increasing order of its group key."""
        return np.argsort(np.asarray(self._key_of, dtype=np.int64), kind="stable")

    def total(self, keys: Iterable[int] | None = None) -> dict[str, float]:
        """The statistics of the union of the given groups (default: all of them)."""
        self._grow(len(self._key_of))  # groups another user of the index added
        if keys is None:
            slots = self._slots_by_key()
        else:
            slots = np.array([self._slot_of[k] for k in keys], dtype=np.int64)
        out: dict[str, float] = {}
        for name, arr in self._data.items():
            kind = self.kinds[name]
            picked = arr[slots]
            if picked.size == 0:
                out[name] = _IDENTITY[kind]
            elif kind == "sum":
                with np.errstate(over="ignore", invalid="ignore"):  # ±inf, ∞ − ∞ = NaN (verl)
                    out[name] = float(picked.sum())
            elif kind == "max":
                out[name] = float(picked.max())
            else:
                out[name] = float(picked.min())
        for name, m in self._moments.items():
            chosen_moments = Moments(*(part[slots] for part in m))
            one = merge_moments(np.zeros(slots.size, dtype=np.int64), chosen_moments, 1)
            out[f"{name}.n"], out[f"{name}.mean"], out[f"{name}.m2"] = (float(p[0]) for p in one)
        return out
