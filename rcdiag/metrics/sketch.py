"""A mergeable quantile sketch with a relative-error guarantee, kept per group (training step).

Values are counted in logarithmic buckets (the DDSketch scheme): with γ = (1 + α) / (1 − α), a value x
with |x| ≥ ``min_abs`` falls in bucket k = ⌈log_γ(|x| / min_abs)⌉ and is represented by
sign(x) · min_abs · 2γᵏ / (γ + 1), which is within a factor (1 ± α) of x. Values with |x| < ``min_abs``
are represented by 0. Hence ``quantile(q)`` returns the order statistic x₍⌊q(n−1)⌋₎ (0-based, ascending)
to within relative error α, or absolute error ``min_abs`` when that statistic is smaller than ``min_abs``
in magnitude. Memory is the number of distinct occupied buckets per group, at most about
2·ln(max|x| / min_abs) / ln γ, independent of the number of values.
"""

from __future__ import annotations

import numpy as np

from rcdiag.metrics.ragged import F64, I64

_DENSE_LIMIT = 20_000_000


class QuantileSketch:
    """Per-group log-bucketed histograms; see the module docstring for the error bound.

    Example:
        >>> s = QuantileSketch(relative_accuracy=0.01)
        >>> s.add(np.zeros(5, dtype=np.int64), np.array([-2.0, -1.0, 0.0, 1.0, 3.0]), keys=[0])
        >>> abs(s.quantile(0, 0.5)) < 1e-12, abs(s.quantile(0, 1.0) - 3.0) <= 0.03
        (True, True)
    """

    def __init__(self, relative_accuracy: float = 0.005, min_abs: float = 1e-12) -> None:
        if not 0.0 < relative_accuracy < 1.0:
            raise ValueError("relative_accuracy must lie in (0, 1)")
        self.relative_accuracy = relative_accuracy
        self.min_abs = min_abs
        self._gamma = (1.0 + relative_accuracy) / (1.0 - relative_accuracy)
        self._log_gamma = float(np.log(self._gamma))
        self._buckets: dict[int, tuple[I64, I64]] = {}

    def _bucket_keys(self, values: F64) -> I64:
        """Monotone integer key per value: 0 for |x| < min_abs, ±(k + 1) otherwise."""
        magnitude = np.abs(values)
        big = magnitude >= self.min_abs
        k = np.zeros(values.size, dtype=np.int64)
        k[big] = np.ceil(np.log(magnitude[big] / self.min_abs) / self._log_gamma).astype(np.int64)
        return np.where(big, np.sign(values).astype(np.int64) * (k + 1), 0)

    def add(self, slots: I64, values: F64, keys: list[int]) -> None:
        """Count ``values[j]`` in group ``keys[slots[j]]`` (``slots`` index into ``keys``)."""
        if values.size == 0:
            return
        bucket = self._bucket_keys(values)
        low, high = int(bucket.min()), int(bucket.max())
        width = high - low + 1
        if len(keys) * width <= _DENSE_LIMIT:
            counts = np.bincount(slots * width + (bucket - low), minlength=len(keys) * width)
            table = counts.reshape(len(keys), width)
            for j, key in enumerate(keys):
                occupied = np.flatnonzero(table[j])
                if occupied.size:
                    self._merge(key, occupied + low, table[j, occupied])
        else:  # many groups and a wide range in one batch: sort instead of a dense table
            pairs, counts = np.unique(
                np.stack([slots, bucket]), axis=1, return_counts=True
            )
            for j, key in enumerate(keys):
                sel = pairs[0] == j
                if sel.any():
                    self._merge(key, pairs[1, sel], counts[sel])

    def _merge(self, key: int, buckets: I64, counts: I64) -> None:
        have = self._buckets.get(key)
        if have is not None:
            buckets, inverse = np.unique(np.concatenate([have[0], buckets]), return_inverse=True)
            counts = np.bincount(inverse, weights=np.concatenate([have[1], counts])).astype(
                np.int64
            )
        self._buckets[key] = (buckets.astype(np.int64), counts.astype(np.int64))

    def _representative(self, bucket: int) -> float:
        if bucket == 0:
            return 0.0
        k = abs(bucket) - 1
        value = self.min_abs * 2.0 * self._gamma**k / (self._gamma + 1.0)
        return float(np.sign(bucket)) * value

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
