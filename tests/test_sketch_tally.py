"""The sketch's tally (distinct (group, bucket) pairs with summed counts) against a dictionary
count, on the one-key path (pairs that fit in 62 bits) and the two-key path (wider ranges)."""

from __future__ import annotations

from collections import Counter

import numpy as np
import pytest

from rcdiag.metrics.sketch import QuantileSketch, _tally


def reference(group: np.ndarray, bucket: np.ndarray, count: np.ndarray) -> list[tuple[int, ...]]:
    totals: Counter[tuple[int, int]] = Counter()
    for g, b, c in zip(group.tolist(), bucket.tolist(), count.tolist(), strict=True):
        totals[(g, b)] += c
    return [(g, b, c) for (g, b), c in sorted(totals.items())]


@pytest.mark.parametrize(
    ("groups", "buckets"),
    [
        ((0, 5), (-50, 50)),  # small: one key
        ((-3, 1000), (-(2**40), 2**40)),  # one key, wide buckets
        ((0, 2**40), (-(2**40), 2**40)),  # too wide for one key: two keys
        ((-(2**62), 2**62), (-(2**62), 2**62)),
    ],
)
def test_tally_counts_each_pair_once_in_order(
    groups: tuple[int, int], buckets: tuple[int, int]
) -> None:
    rng = np.random.default_rng(3)
    group = rng.integers(*groups, size=3000, dtype=np.int64)
    bucket = rng.integers(*buckets, size=3000, dtype=np.int64)
    group[1000:2000], bucket[1000:2000] = group[:1000], bucket[:1000]  # repeated pairs
    count = rng.integers(1, 9, size=3000, dtype=np.int64)
    found = _tally(group, bucket, count)
    assert list(zip(*(a.tolist() for a in found), strict=True)) == reference(group, bucket, count)
    empty = np.empty(0, dtype=np.int64)
    assert all(a.size == 0 for a in _tally(empty, empty, empty))


def test_merged_sketches_equal_one_sketch_of_all_values() -> None:
    rng = np.random.default_rng(5)
    parts = [(rng.integers(0, 40, 5000), rng.standard_t(3, 5000)) for _ in range(12)]
    whole, merged = QuantileSketch(), QuantileSketch()
    keys = list(range(40))
    for slots, values in parts:
        whole.add(slots.astype(np.int64), values, keys)
        part = QuantileSketch()
        part.add(slots.astype(np.int64), values, keys)
        merged.merge(part)
    qs = [0.001, 0.5, 0.999]
    for a, b in zip(whole.quantiles(qs), merged.quantiles(qs), strict=True):
        assert np.array_equal(a, b)
