"""Per-group statistics (rcdiag/metrics/grouped.py) against a plain per-row loop: sums, extremes
and moments, one addition or many folded together, rows in any order."""

from __future__ import annotations

import math

import numpy as np
import pytest

from rcdiag.metrics.grouped import GroupedStats, GroupIndex, Moments, add_all

KINDS = {"s": "sum", "hi": "max", "lo": "min"}


def reference(batches: list[tuple[np.ndarray, dict[str, np.ndarray]]]) -> dict[int, dict]:
    """Group → statistic → value, one row at a time."""
    out: dict[int, dict[str, float]] = {}
    for keys, values in batches:
        for i, key in enumerate(keys.tolist()):
            group = out.setdefault(key, {"s": 0.0, "hi": -math.inf, "lo": math.inf})
            group["s"] += float(values["s"][i])
            group["hi"] = max(group["hi"], float(values["hi"][i]))
            group["lo"] = min(group["lo"], float(values["lo"][i]))
    return out


@pytest.mark.parametrize("order", ["sorted", "shuffled", "one group"])
def test_add_all_equals_a_row_by_row_reference(order: str) -> None:
    rng = np.random.default_rng(0)
    index = GroupIndex()
    a, b = GroupedStats(KINDS, index), GroupedStats(KINDS, index)
    batches_a, batches_b = [], []
    for _ in range(5):
        rows = int(rng.integers(1, 40))
        keys = np.zeros(rows, np.int64) if order == "one group" else rng.integers(0, 6, rows)
        if order == "sorted":
            keys = np.sort(keys)
        va = {k: rng.normal(size=rows) for k in KINDS}
        vb = {k: rng.normal(size=rows) for k in KINDS}
        slots = index.slots_for(keys)
        add_all([(a, slots, va), (b, slots, vb)])  # one reduction per kind for both
        batches_a.append((keys, va))
        batches_b.append((keys, vb))
    for stats, batches in ((a, batches_a), (b, batches_b)):
        expected = reference(batches)
        assert stats.keys() == sorted(expected)
        for key, values in expected.items():
            got = stats.group(key)
            for name, value in values.items():
                assert got[name] == pytest.approx(value, rel=1e-12, abs=1e-12)


def test_a_nan_makes_the_extreme_nan_and_the_sum_nan() -> None:
    stats = GroupedStats(KINDS)
    slots = stats.slots_for(np.array([1, 1, 2]))
    nan = np.array([np.nan, 1.0, 2.0])
    stats.add(slots, {"s": nan, "hi": nan, "lo": nan})
    one, two = stats.group(1), stats.group(2)
    assert all(math.isnan(one[k]) for k in KINDS)
    assert two == {"s": 2.0, "hi": 2.0, "lo": 2.0}


def test_moments_fold_with_the_other_statistics() -> None:
    stats = GroupedStats({"m": "moments", "s": "sum"})
    slots = stats.slots_for(np.array([3, 3, 4]))
    values = np.array([1.0, 3.0, 5.0])
    add_all([(stats, slots, {"m": Moments(np.ones(3), values, np.zeros(3)), "s": values})])
    three = stats.group(3)
    assert (three["m.n"], three["m.mean"], three["m.m2"], three["s"]) == (2.0, 2.0, 2.0, 4.0)
    assert stats.group(4)["s"] == 5.0


def test_flags_are_counted() -> None:
    stats = GroupedStats({"count": "sum", "other": "sum"})
    slots = stats.slots_for(np.array([0, 0, 0, 1]))
    stats.add(slots, {"count": np.array([True, True, False, True])})  # flags alone: not an "or"
    stats.add(slots, {"other": np.array([1, 2, 3, 4])})
    assert stats.group(0) == {"count": 2.0, "other": 6.0}
    assert stats.group(1) == {"count": 1.0, "other": 4.0}
