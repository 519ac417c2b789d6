"""A mergeable quantile sketch with a relative-error guarantee, kept per group (training step).

Values are counted in log-linear buckets read straight off their float64 bit patterns (the HDR
histogram scheme): a bucket keeps the sign, the exponent and the top ``mantissa_bits`` bits of the
mantissa, so it spans [2ᵉ(1 + j/2ᵐ), 2ᵉ(1 + (j+1)/2ᵐ)) and its midpoint is within relative error
2⁻⁽ᵐ⁺¹⁾ of every value in it (0.39 % for the default m = 7). Hence ``quantile(q)`` returns the order
statistic x₍⌊q(n−1)⌋₎ (0-based, ascending) to within that relative error — or, for a subnormal
statistic (|x| < 2.2e-308), to within that absolute amount. Bucketing is two integer
passes over the data, with no logarithm. Memory is the number of distinct occupied buckets per group:
2ᵐ per power of two spanned, independent of the number of values.

All groups live in three flat arrays (group, bucket, count), sorted by group then bucket, so adding a
batch and reading every group's quantiles are a few sorts and cumulative sums, whatever the number of
groups.
"""

from __future__ import annotations

from collections.abc import Sequence

import numpy as np

from rcdiag.metrics.ragged import F64, I64

_DENSE_LIMIT = 20_000_000
_COMPACT_AT = 1_000_000
"""Pending (group, bucket) entries that trigger a merge into the sorted tallies (bounds memory)."""
_MAGNITUDE_BITS = np.int64(0x7FFF_FFFF_FFFF_FFFF)


def _tally(group: I64, bucket: I64, count: I64) -> tuple[I64, I64, I64]:
    """Distinct (group, bucket) pairs, sorted by group then bucket, with their summed counts.

    The pair is one integer, (group − min) · span + (bucket − min): counted in a dense table when
    there are at most a few cells per entry (the pooled tally of every group: one group, buckets
    spanning at most 2¹⁹ values at the default resolution), else sorted whenever it fits in 62
    bits: one stable sort, which runs in near-linear time on the concatenated sorted tallies that
    merging sketches gives (2–3× faster than sorting on two keys there); else on two keys.
    """
    if group.size == 0:
        return group, bucket, count
    low_group, low_bucket = int(group.min()), int(bucket.min())
    span = int(bucket.max()) - low_bucket + 1
    cells = (int(group.max()) - low_group + 1) * span
    if cells <= min(_DENSE_LIMIT, 8 * group.size):  # a table no larger than a few entries each
        key = (group - low_group) * span + (bucket - low_bucket)
        table = np.bincount(key, weights=count, minlength=cells)  # float64: exact below 2⁵³
        cell = np.flatnonzero(table)
        return cell // span + low_group, cell % span + low_bucket, table[cell].astype(np.int64)
    if cells < 1 << 62:
        key = (group - low_group) * span + (bucket - low_bucket)
        order = np.argsort(key, kind="stable")
        key = key[order]
        first = np.flatnonzero(np.concatenate([[True], key[1:] != key[:-1]]))
        distinct = key[first]
        return (
            distinct // span + low_group,
            distinct % span + low_bucket,
            np.add.reduceat(count[order], first),
        )
    order = np.lexsort((bucket, group))
    group, bucket, count = group[order], bucket[order], count[order]
    first = np.flatnonzero(
        np.concatenate([[True], (group[1:] != group[:-1]) | (bucket[1:] != bucket[:-1])])
    )
    return group[first], bucket[first], np.add.reduceat(count, first)


def _interleaved(parts: Sequence[tuple[I64, I64, I64]]) -> tuple[I64, I64, I64] | None:
    """The tallies of ``parts`` merged without sorting their entries, when each part is sorted
    (by group, then bucket, each pair once) and no two parts share a group: whole groups are moved
    into group order (what merging the sketches of different files, one step each, gives).
    None otherwise (a part unsorted, a group in two parts: :func:`_tally` then sorts)."""
    columns = [np.concatenate(column) for column in zip(*parts, strict=True)]
    group, bucket, _ = columns
    if group.size == 0:
        return None
    begins = np.zeros(group.size, dtype=bool)  # where a part begins
    starts_of_parts = np.cumsum([p[0].size for p in parts])[:-1]
    begins[starts_of_parts[starts_of_parts < group.size]] = True
    begins[0] = True
    rises = np.diff(group)
    within = ~begins[1:]  # every step inside a part goes up: a later group, or a later bucket
    if (within & ((rises < 0) | ((rises == 0) & (np.diff(bucket) <= 0)))).any():
        return None
    begins[1:] |= rises != 0
    first = np.flatnonzero(begins)  # each run of one group inside one part
    runs = np.sort(group[first])  # (np.unique would import numpy.ma: ~12 ms of a start-up)
    if (runs[1:] == runs[:-1]).any():
        return None  # a group in two parts: its entries must be summed
    order = np.argsort(group[first], kind="stable")
    lengths = np.diff(np.append(first, group.size))[order]
    starts = first[order]
    index = np.repeat(starts - np.concatenate([[0], np.cumsum(lengths)[:-1]]), lengths)
    index += np.arange(group.size)
    return group[index], bucket[index], columns[2][index]


class QuantileSketch:
    """Per-group log-linear histograms; see the module docstring for the error bound.

    Example:
        >>> s = QuantileSketch()
        >>> s.add(np.zeros(5, dtype=np.int64), np.array([-2.0, -1.0, 0.0, 1.0, 3.0]), keys=[0])
        >>> s.quantile(0, 0.5), abs(s.quantile(0, 1.0) / 3.0 - 1) <= s.relative_error
        (0.0, True)
    """

    def __init__(self, mantissa_bits: int = 7) -> None:
        if not 0 <= mantissa_bits <= 20:
            raise ValueError("mantissa_bits must lie in [0, 20]")
        self.relative_error = 2.0 ** -(mantissa_bits + 1)
        self._shift = 52 - mantissa_bits
        empty = np.empty(0, dtype=np.int64)
        self._tallies: tuple[I64, I64, I64] = (empty, empty, empty)
        self._pending: list[tuple[I64, I64, I64]] = []
        self._pending_size = 0

    def __getstate__(self) -> dict[str, object]:
        """Pickled compacted (a cache entry or a Ray task's result is then merged without sorting
        its pending entries again on every load)."""
        self._compact()
        return dict(self.__dict__)

    def _bucket_keys(self, values: F64) -> I64:
        """A monotone integer key per value: order-preserving bits, truncated to the bucket."""
        bits = np.ascontiguousarray(values, dtype=np.float64).view(np.int64)
        # Flip the magnitude bits of negatives so that integer order equals float order.
        flip = bits >> 63
        flip &= _MAGNITUDE_BITS
        flip ^= bits
        flip >>= self._shift
        return flip

    def _flipped(self, raw: I64) -> I64:
        """:meth:`_bucket_keys` from the values' bits shifted right (``bits >> shift``): the flip
        of the negatives' magnitude bits commutes with the shift."""
        return raw ^ ((raw >> 63) & (int(_MAGNITUDE_BITS) >> self._shift))

    @property
    def mantissa_bits(self) -> int:
        """The resolution m: a bucket spans a relative width of 2⁻ᵐ."""
        return 52 - self._shift

    def least_magnitudes(self, buckets: I64) -> F64:
        """The value of least magnitude in each bucket (a member of it: ±0 for the buckets next
        to 0, ±inf for the infinities' buckets)."""
        low = buckets << self._shift
        negative = buckets >> 63  # all ones for the buckets of negative values, else 0
        low |= negative & (
            (1 << self._shift) - 1
        )  # flipped back below, so the magnitude's bits are 0
        low ^= negative & _MAGNITUDE_BITS
        return low.view(np.float64)

    def pooled_buckets(self) -> tuple[I64, I64]:
        """Every occupied bucket of all groups together, ascending, and the values it counts."""
        _, bucket, count = self._compact()
        if count.size == 0:
            return bucket, count
        _, bucket, count = _tally(np.zeros_like(bucket), bucket, count)
        return bucket, count

    def _representatives(self, buckets: I64) -> F64:
        """The midpoint of each bucket's magnitudes (within relative_error of every member); 0 for
        the buckets holding zero or straddling it. Written so that it cannot overflow next to the
        largest float."""
        low = buckets << self._shift
        high = low | ((1 << self._shift) - 1)
        edges = [(b ^ ((b >> 63) & _MAGNITUDE_BITS)).view(np.float64) for b in (low, high)]
        zero = (edges[0] == 0.0) | (edges[1] == 0.0) | (np.sign(edges[0]) != np.sign(edges[1]))
        return np.where(zero, 0.0, edges[0] + (edges[1] - edges[0]) / 2.0)

    def add(
        self, slots: I64 | None, values: F64, keys: Sequence[int], bound: float | None = None
    ) -> None:
        """Count ``values[j]`` in group ``keys[slots[j]]`` (``slots`` index into ``keys``; None
        when ``keys`` holds one group, which every value then belongs to). ``bound``: a known
        bound on every |value| (the batch's largest |ℓ|), which spares finding the range of
        their buckets."""
        if values.size == 0:
            return
        if slots is None and len(keys) != 1:
            raise ValueError("slots are needed for more than one group")
        # the sign and top bits of each value: its bucket, before the flip that orders the
        # negatives (made once per distinct bucket below, not once per value)
        raw = np.ascontiguousarray(values, dtype=np.float64).view(np.int64) >> self._shift
        if bound is not None and 0.0 <= bound < np.inf:  # (a NaN bound fails the test)
            # |v| ≤ bound: raw keys in [−2^(63−s), −2^(63−s) + top] (negatives) and [0, top]
            top = int(np.array([bound]).view(np.int64)[0]) >> self._shift
            low, high = -(1 << (63 - self._shift)), top
        else:
            low, high = int(raw.min()), int(raw.max())
        width = high - low + 1
        if len(keys) * width <= min(_DENSE_LIMIT, 8 * values.size):  # count in a dense table
            raw -= low
            if slots is not None:
                raw += slots * width
            table = np.bincount(raw, minlength=len(keys) * width)
            cell = np.flatnonzero(table)
            slot, bucket = cell // width, self._flipped(cell % width + low)
            order = np.lexsort((bucket, slot))  # the flip reversed the negatives' order
            slot, bucket, count = slot[order], bucket[order], table[cell[order]]
        else:  # a table much larger than the batch: sort instead
            if slots is None:
                slots = np.zeros(values.size, dtype=np.int64)
            ones = np.ones(raw.size, dtype=np.int64)
            slot, bucket, count = _tally(slots, self._flipped(raw), ones)
        group = np.asarray(keys, dtype=np.int64)[slot]
        self._pending.append((group, bucket.astype(np.int64), count.astype(np.int64)))
        self._pending_size += group.size
        if self._pending_size > max(_COMPACT_AT, self._tallies[0].size):
            self._compact()

    def merge(self, other: QuantileSketch) -> None:
        """Count in every value ``other`` counted (same resolution): the counts of each (group,
        bucket) add, so the result is the sketch of both value sets, exactly."""
        if other._shift != self._shift:
            raise ValueError("cannot merge sketches of different resolutions")
        tallies = other._compact()
        if tallies[0].size:
            self._pending.append(tallies)
            self._pending_size += tallies[0].size
            if self._pending_size > max(_COMPACT_AT, self._tallies[0].size):
                self._compact()

    def _compact(self) -> tuple[I64, I64, I64]:
        """Merge the pending entries into the sorted tallies; returns the tallies."""
        if self._pending:
            parts = [self._tallies, *self._pending]
            merged = _interleaved(parts)
            if merged is None:
                merged = _tally(*(np.concatenate(column) for column in zip(*parts, strict=True)))
            self._tallies = merged
            self._pending, self._pending_size = [], 0
        return self._tallies

    def _read(self, bucket: I64, count: I64, first: I64, qs: Sequence[float]) -> F64:
        """x₍⌊q(n−1)⌋₎ of each segment of the sorted tallies (segment i starts at ``first[i]``),
        [segments, len(qs)]: one cumulative sum; segment i's rank r lies at the first entry whose
        cumulative count exceeds (the counts before the segment) + r."""
        cumulative = np.cumsum(count)
        before = np.concatenate([[0], cumulative])[first]
        size = np.append(before[1:], cumulative[-1:]) - before
        out = np.empty((first.size, len(qs)))
        for j, q in enumerate(qs):
            rank = np.floor(q * (size - 1)).astype(np.int64)
            at = np.searchsorted(cumulative, before + rank, side="right")
            out[:, j] = self._representatives(bucket[at])
        return out

    def quantiles(self, qs: Sequence[float]) -> tuple[I64, F64]:
        """Every group's approximate x₍⌊q(n−1)⌋₎ for each q: (groups, values [groups, len(qs)])."""
        group, bucket, count = self._compact()
        first = np.flatnonzero(np.diff(group, prepend=group[:1] - 1))
        return group[first], self._read(bucket, count, first, qs)

    def pooled_quantiles(self, qs: Sequence[float]) -> F64:
        """Approximate x₍⌊q(n−1)⌋₎ of all groups together for each q (NaN when empty)."""
        bucket, count = self.pooled_buckets()
        if count.size == 0:
            return np.full(len(qs), np.nan)
        return self._read(bucket, count, np.zeros(1, dtype=np.int64), qs)[0]

    def quantile(self, key: int, q: float) -> float:
        """Approximate x₍⌊q(n−1)⌋₎ of one group (NaN for a group without values)."""
        group, bucket, count = self._compact()
        start, stop = np.searchsorted(group, [key, key + 1])
        if start == stop:
            return float("nan")
        chosen = slice(start, stop)
        return float(self._read(bucket[chosen], count[chosen], np.zeros(1, np.int64), [q])[0, 0])
