"""The sketch's tally (distinct (group, bucket) pairs with summed counts) against a dictionary
count, on the one-key path (pairs that fit in 62 bits) and the two-key path (wider ranges), and
the tallies of a batch added with a bound on its values."""

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


def sorted_part(groups: list[int], rng: np.random.Generator) -> tuple[np.ndarray, ...]:
    group = np.repeat(np.asarray(groups, dtype=np.int64), 30)
    bucket = rng.integers(-500, 500, size=group.size, dtype=np.int64)
    return _tally(group, bucket, rng.integers(1, 5, size=group.size, dtype=np.int64))


def test_parts_without_a_shared_group_are_interleaved_exactly() -> None:
    from rcdiag.metrics.sketch import _interleaved

    rng = np.random.default_rng(8)
    steps = rng.permutation(60).tolist()
    parts = [sorted_part(sorted(steps[i : i + 7]), rng) for i in range(0, 60, 7)]
    empty = np.empty(0, dtype=np.int64)
    parts = [(empty, empty, empty), *parts]
    merged = _interleaved(parts)
    assert merged is not None
    whole = _tally(*(np.concatenate(c) for c in zip(*parts, strict=True)))
    for a, b in zip(merged, whole, strict=True):
        assert np.array_equal(a, b)
    shared = [*parts, sorted_part([steps[0]], rng)]  # a group in two parts: summed by a sort
    assert _interleaved(shared) is None
    group, bucket, count = parts[1]
    unsorted = (group[::-1].copy(), bucket[::-1].copy(), count[::-1].copy())
    assert _interleaved([unsorted]) is None


def test_sketches_of_separate_steps_merge_as_one() -> None:
    rng = np.random.default_rng(9)
    whole, merged = QuantileSketch(), QuantileSketch()
    for step in rng.permutation(30).tolist():
        values = rng.standard_t(4, 2000)
        whole.add(None, values, [step])
        part = QuantileSketch()
        part.add(None, values, [step])
        merged.merge(part)
    qs = [0.001, 0.25, 0.5, 0.999]
    for a, b in zip(whole.quantiles(qs), merged.quantiles(qs), strict=True):
        assert np.array_equal(a, b)
    assert np.array_equal(whole.pooled_quantiles(qs), merged.pooled_quantiles(qs))


@pytest.mark.parametrize(
    "values",
    [
        np.array([0.0, -0.0, 0.0]),
        np.array([1e-3, 2e-3, 0.5]),  # one sign
        np.array([-4.0, -1e-300, 0.0, 3.0, 5e-324]),  # both signs, subnormal, zero
        np.random.default_rng(3).normal(0.0, 0.02, 5000),
    ],
)
@pytest.mark.parametrize("slack", [1.0, 1.5, 1e6])
def test_a_bound_on_the_values_changes_no_count(values: np.ndarray, slack: float) -> None:
    """add(..., bound) with any bound ≥ max |value| tallies exactly what add() does."""
    plain, bounded = QuantileSketch(), QuantileSketch()
    slots = np.arange(values.size, dtype=np.int64) % 2
    plain.add(slots, values, [4, 9])
    bounded.add(slots, values, [4, 9], float(np.abs(values).max()) * slack)
    for mine, theirs in zip(plain._compact(), bounded._compact(), strict=True):
        np.testing.assert_array_equal(mine, theirs)


@pytest.mark.parametrize(("size", "decades"), [(3, 300), (200, 300), (20_000, 300), (150_000, 4)])
@pytest.mark.parametrize("bounded", [False, True])
@pytest.mark.parametrize("groups", [1, 3])
def test_added_tallies_are_the_distinct_buckets_counted_directly(
    size: int, decades: int, bounded: bool, groups: int
) -> None:
    """Whichever way a batch is counted (a dense table of the values' shifted bits, flipped once
    per bucket: many values of a narrow range; or a sort of the flipped keys), the pending
    tallies are each (group, bucket) once, sorted, with its count: ±0, subnormals, both signs."""
    rng = np.random.default_rng(size + groups)
    values = rng.normal(0, 1, size) * 10 ** rng.uniform(-decades, 0, size)
    values[:3] = [0.0, -0.0, -5e-324]
    rng.shuffle(values)
    keys = [7, 2, 11][:groups]
    slots = rng.integers(0, groups, size) if groups > 1 else None
    sketch = QuantileSketch()
    sketch.add(slots, values, keys, float(np.abs(values).max()) if bounded else None)
    group, bucket, count = sketch._pending[0]
    group_of = np.asarray(keys)[slots] if slots is not None else np.full(size, keys[0])
    pairs = sorted(zip(group_of.tolist(), sketch._bucket_keys(values).tolist(), strict=True))
    want = {}
    for pair in pairs:
        want[pair] = want.get(pair, 0) + 1
    got = list(zip(group.tolist(), bucket.tolist(), strict=True))
    assert dict(zip(got, count.tolist(), strict=True)) == want
    # in slot order, and each group's buckets ascending (what merging without a sort relies on)
    order = {key: slot for slot, key in enumerate(keys)}
    assert got == sorted(got, key=lambda pair: (order[pair[0]], pair[1]))
