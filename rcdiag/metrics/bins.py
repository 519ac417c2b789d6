"""The fixed bins of the mismatch profile: signed log-spaced bins of ℓ, rollout-probability buckets
and log₂ position and length buckets (docs/report.md, "Where it lives").

Every index is computed arithmetically or with a few comparisons and equals a binary search over
the edges exactly (tested on and next to every edge).
"""

from __future__ import annotations

import functools

import numpy as np
from numpy.typing import NDArray

from rcdiag.metrics.ragged import F64, I64, Floats

BINS_PER_DECADE = 8
"""Histogram resolution: 8 bins per decade of |x| (each bin spans a factor 10^(1/8) ≈ 1.33)."""
LOG_MAGNITUDE_RANGE = (-5, 4)
"""Decades of |x| covered by regular bins: 10⁻⁵ … 10⁴."""

_MAGNITUDES = 10.0 ** np.linspace(
    LOG_MAGNITUDE_RANGE[0],
    LOG_MAGNITUDE_RANGE[1],
    (LOG_MAGNITUDE_RANGE[1] - LOG_MAGNITUDE_RANGE[0]) * BINS_PER_DECADE + 1,
)
SIGNED_LOG_EDGES: F64 = np.concatenate([-_MAGNITUDES[::-1], _MAGNITUDES])
"""Increasing bin edges e_0 < … < e_145; bin j holds e_(j−1) ≤ x < e_j (bin 0: x < e_0, last: x ≥ e_145)."""

ROLLOUT_PROB_EDGES: tuple[float, ...] = (1e-4, 1e-3, 0.01, 0.1, 0.25, 0.5, 0.75, 0.9, 0.99, 0.999)
"""Rollout-probability buckets: [0, 1e-4), [1e-4, 1e-3), …, [0.999, 1]."""
_LOG_PROB_EDGES: F64 = np.log(np.array(ROLLOUT_PROB_EDGES))

LOG2_BUCKETS = 21
"""Position and length buckets ⌊log₂ t⌋ = 0 … 20 (the last one also holds anything longer)."""


def rollout_prob_bucket(rollout_log_probs: Floats) -> I64:
    """Index of the :data:`ROLLOUT_PROB_EDGES` bucket of each rollout log-prob: the number of edges
    p with log p ≤ x (ten comparisons, cheaper than a binary search per token; counted in bytes,
    an eighth of the memory traffic of 64-bit counts, then widened once).

    The log-probs are compared as read (float16, 32 or 64), each edge rounded up to their type:
    a value x of that type is ≥ log p exactly when it is ≥ the least value of the type that is,
    so the buckets are those of float64 comparisons, without widening the tokens first.
    """
    bucket = np.zeros(rollout_log_probs.size, dtype=np.uint8)
    for edge in _edges_of(rollout_log_probs.dtype):
        bucket += rollout_log_probs >= edge
    return bucket.astype(np.int64)


@functools.cache
def _edges_of(dtype: np.dtype) -> tuple[np.floating, ...]:
    """:data:`_LOG_PROB_EDGES` each rounded up to ``dtype`` (a scalar of that type each)."""
    rounded = _LOG_PROB_EDGES.astype(dtype)
    low = rounded.astype(np.float64) < _LOG_PROB_EDGES
    rounded[low] = np.nextafter(rounded[low], np.inf)
    return tuple(rounded)


def position_runs(offsets: I64) -> tuple[I64, I64]:
    """The runs of positions of one :func:`log2_bucket` in every row: their first flat index and
    their bucket (rows in order, buckets in order within a row; empty rows have none).

    Example:
        >>> position_runs(np.array([0, 5, 5, 7]))  # positions 1 | 2–3 | 4–5, then 1 | 2
        (array([0, 1, 3, 5, 6]), array([0, 1, 2, 0, 1]))
    """
    lengths = np.diff(offsets)
    runs = np.where(lengths > 0, log2_bucket(np.maximum(lengths, 1)) + 1, 0)
    first_run = np.zeros(runs.size + 1, dtype=np.int64)
    np.cumsum(runs, out=first_run[1:])
    bucket = np.arange(first_run[-1], dtype=np.int64) - np.repeat(first_run[:-1], runs)
    return np.repeat(offsets[:-1], runs) + (1 << bucket) - 1, bucket


_KEY_SHIFT = 45
"""A value's bin key is its float64 bit pattern shifted right by this: sign, exponent and the top 7
mantissa bits, so each key holds the values of one sign within a relative width of 2⁻⁷ (0.8 %),
far narrower than a bin (a factor 10^(1/8) ≈ 1.33)."""


@functools.cache
def _key_bins() -> tuple[NDArray[np.int16], NDArray[np.bool_]]:
    """For every key (2¹⁹): the bin of all its values, and whether that is not one bin (an edge
    lies among its values, or it holds ±inf or NaN): those values are binned one by one."""
    keys = np.arange(1 << (64 - _KEY_SHIFT), dtype=np.uint64)
    first = (keys << np.uint64(_KEY_SHIFT)).view(np.float64)  # the key's smallest magnitude
    last = ((keys << np.uint64(_KEY_SHIFT)) | np.uint64((1 << _KEY_SHIFT) - 1)).view(np.float64)
    with np.errstate(invalid="ignore"):
        low = np.searchsorted(SIGNED_LOG_EDGES, first, side="right")
        high = np.searchsorted(SIGNED_LOG_EDGES, last, side="right")
        special = ~np.isfinite(first) | ~np.isfinite(last)
    return low.astype(np.int16), (low != high) | special


def signed_log_bin(values: F64) -> I64:
    """Index of the :data:`SIGNED_LOG_EDGES` bin of each value (0 … 146): the number of edges ≤ x
    (NaN: the last bin).

    Read from a table by the top bits of each value (:data:`_KEY_SHIFT`); the few values whose key
    straddles an edge (or holds ±inf, NaN) are placed by a binary search. So every value lands
    exactly where a binary search would put it, in a few passes and without a logarithm.

    Example:
        >>> signed_log_bin(np.array([-1e9, -1.0, 0.0, 1.0, 1e9])).tolist()
        [0, 33, 73, 114, 146]
    """
    values = np.ascontiguousarray(values, dtype=np.float64)
    bins, straddles = _key_bins()
    keys = values.view(np.uint64) >> np.uint64(_KEY_SHIFT)
    index = bins.take(keys).astype(np.int64)
    exact = np.flatnonzero(straddles.take(keys))
    if exact.size:
        index[exact] = np.searchsorted(SIGNED_LOG_EDGES, values[exact], side="right")
    return index


def signed_log_histogram(values: F64) -> I64:
    """How many values fall in each :data:`SIGNED_LOG_EDGES` bin: ``np.bincount`` of
    :func:`signed_log_bin`, counted key by key first (one count per distinct key, binned once),
    so that only the values of the few keys that straddle an edge are binned one by one.

    Example:
        >>> signed_log_histogram(np.array([-1.0, 0.0, 0.0, 1e9]))[[33, 73, 146]].tolist()
        [1, 2, 1]
    """
    values = np.ascontiguousarray(values, dtype=np.float64)
    bins, straddles = _key_bins()
    keys = (values.view(np.uint64) >> np.uint64(_KEY_SHIFT)).view(np.int64)
    per_key = np.bincount(keys, minlength=bins.size)
    present = np.flatnonzero(per_key)
    plain = present[~straddles[present]]
    size = SIGNED_LOG_EDGES.size + 1
    counts = np.bincount(bins[plain], weights=per_key[plain], minlength=size).astype(np.int64)
    if plain.size < present.size:  # some values sit in a key an edge cuts
        exact = values[straddles.take(keys)]
        counts += np.bincount(
            np.searchsorted(SIGNED_LOG_EDGES, exact, side="right"), minlength=size
        )
    return counts


def log2_bucket(counts: I64 | F64) -> I64:
    """⌊log₂ x⌋ for x ≥ 1, capped at ``LOG2_BUCKETS − 1`` (exact for integers, via frexp).

    Example:
        >>> log2_bucket(np.array([1, 2, 3, 4, 7, 8])).tolist()
        [0, 1, 1, 2, 2, 3]
    """
    _, exponent = np.frexp(np.asarray(counts, dtype=np.float64))
    return np.minimum(exponent.astype(np.int64) - 1, LOG2_BUCKETS - 1)


def log2_bucket_label(bucket: int) -> str:
    """``1``, ``2–3``, ``4–7``, …; the last bucket is open-ended."""
    lo = 1 << bucket
    if bucket == LOG2_BUCKETS - 1:
        return f"≥{lo:,}"
    hi = (1 << (bucket + 1)) - 1
    return f"{lo:,}" if lo == hi else f"{lo:,}–{hi:,}"


def prob_label(bucket: int) -> str:
    """``0–0.0001``, ``0.0001–0.001``, …: a rollout-probability bucket in words."""
    edges = (0.0, *ROLLOUT_PROB_EDGES, 1.0)
    lo, hi = edges[bucket], edges[bucket + 1]
    return f"{lo:g}–{hi:g}"
