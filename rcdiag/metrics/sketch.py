"""A mergeable quantile sketch with a relative-error guarantee, kept per group (training step).

Values are counted in log-linear buckets read straight off their float64 bit patterns (the HDR
histogram scheme): a bucket keeps the sign, the exponent and the top ``mantissa_bits`` bits of the
mantissa, so it spans [2ᵉ(1 + j/2ᵐ), 2ᵉ(1 + (j+1)/2ᵐ)) and its midpoint is within relative error
2⁻⁽ᵐ⁺¹⁾ of every value in it (0.39 % for the default m = 7). Hence ``quantile(q)`` returns the order
statistic x₍⌊q(n−1)⌋₎ (0-based, ascending) to within that relative error — or, for a subnormal
statistic (|x| < 2.2e-308), to within that absolute amount. Bucketing is two integer
passes over the data, with no logarithm. Memory is the number of distinct occupied buckets per group:
2ᵐ per power of two spanned, independent of the number of values.
"""

from __future__ import annotations

import numpy as np

from rcdiag.metrics.ragged import F64, I64

_DENSE_LIMIT = 20_000_000
_MAGNITUDE_BITS = np.int64(0x7FFF_FFFF_FFFF_FFFF)


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
        self._buckets: dict[int, tuple[I64, I64]] = {}

    def _bucket_keys(self, values: F64) -> I64:
        """A monotone integer key per value: order-preserving bits, truncated to the bucket."""
        bits = np.ascontiguousarray(values, dtype=np.float64).view(np.int64)
        # Flip the magnitude bits of negatives so that integer order equals float order.
        ordered = bits ^ ((bits >> 63) & _MAGNITUDE_BITS)
        return ordered >> self._shift

    def _representative(self, key: int) -> float:
        low = np.array([key << self._shift, (key << self._shift) | ((1 << self._shift) - 1)])
        bits = low ^ ((low >> 63) & _MAGNITUDE_BITS)
        edges = bits.astype(np.int64).view(np.float64)
        if edges[0] == 0.0 or edges[1] == 0.0 or np.sign(edges[0]) != np.sign(edges[1]):
            return 0.0
        # The midpoint of the bucket's magnitudes: within relative_error of every member (written
        # so that it cannot overflow next to the largest float).
        return float(edges[0] + (edges[1] - edges[0]) / 2.0)

    def add(self, slots: I64, values: F64, keys: list[int]) -> None:
        """Count ``values[j]`` in group ``keys[slots[j]]`` (``slots`` index into ``keys``)."""
        if values.size == 0:
            return
        bucket = self._bucket_keys(values)
        if len(keys) == 1:
            low = int(bucket.min())
            counts = np.bincount(bucket - low)
            occupied = np.flatnonzero(counts)
            self._merge(keys[0], occupied + low, counts[occupied])
            return
        low, high = int(bucket.min()), int(bucket.max())
        width = high - low + 1
        if len(keys) * width <= _DENSE_LIMIT:
            table = np.bincount(slots * width + (bucket - low), minlength=len(keys) * width)
            table = table.reshape(len(keys), width)
            for j, key in enumerate(keys):
                occupied = np.flatnonzero(table[j])
                if occupied.size:
                    self._merge(key, occupied + low, table[j, occupied])
        else:  # many groups and a wide range in one batch: sort instead of a dense table
            pairs, counts = np.unique(np.stack([slots, bucket]), axis=1, return_counts=True)
            for j, key in enumerate(keys):
                sel = pairs[0] == j
                if sel.any():
                    self._merge(key, pairs[1, sel], counts[sel])

    def _merge(self, key: int, buckets: I64, counts: I64) -> None:
        have = self._buckets.get(key)
        if have is not None:
            buckets, inverse = np.unique(np.concatenate([have[0], buckets]), return_inverse=True)
            counts = np.bincount(inverse, weights=np.concatenate([have[1], counts]))
        self._buckets[key] = (buckets.astype(np.int64), counts.astype(np.int64))

    def quantile(self, key: int | None, q: float) -> float:
        """Approximate x₍⌊q(n−1)⌋₎ of one group, or of all groups together when ``key`` is None."""
        if key is None:
            parts = list(self._buckets.values())
            if not parts:
                return float("nan")
            buckets, inverse = np.unique(np.concatenate([p[0] for p in parts]), return_inverse=True)
            counts = np.bincount(inverse, weights=np.concatenate([p[1] for p in parts]))
        elif key in self._buckets:
            buckets, counts = self._buckets[key]
        else:
            return float("nan")
        cumulative = np.cumsum(counts)
        rank = np.floor(q * (cumulative[-1] - 1))
        index = int(np.searchsorted(cumulative, rank, side="right"))
        return self._representative(int(buckets[index]))
