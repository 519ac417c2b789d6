"""The fixed bins of the mismatch profile: signed log-spaced bins of ℓ, rollout-probability buckets
and log₂ position and length buckets (docs/report.md, "The profile").

Every index is computed arithmetically, with a few comparisons or a binary search, and equals the
definition exactly (tested on and next to every edge).
"""

from __future__ import annotations

import functools

import numpy as np

from rcdiag.metrics.ragged import F64, I64, Bool, Floats

BINS_PER_DECADE = 8
"""Histogram resolution: 8 bins per decade of |x| (each bin spans a factor 10^(1/8) ≈ 1.33)."""
LOG_MAGNITUDE_RANGE = (-5, 4)
"""Decades of |x| covered by regular bins: 10⁻⁵ … 10⁴."""
HISTOGRAM_GRID_BITS = 7
"""Every edge magnitude lies on the grid 2ᵉ(1 + j/2⁷): the grid of the analysis's ℓ sketch
(:class:`~rcdiag.metrics.sketch.QuantileSketch`), whose buckets therefore each lie inside one bin,
so that the histogram of ℓ is read off the sketch's counts exactly (no pass over the tokens)."""


def _on_grid(magnitudes: F64) -> F64:
    """Each magnitude rounded to the nearest point of the :data:`HISTOGRAM_GRID_BITS` grid (a
    relative change below 2⁻⁸ ≈ 0.4 %: 10⁻⁵ becomes 1.0014e-5, 10⁻³ 9.995e-4; 1, 10, 100 and 1000
    lie on it already)."""
    mantissa, exponent = np.frexp(magnitudes)  # x = m·2ᵉ with m in [0.5, 1)
    steps = float(1 << (HISTOGRAM_GRID_BITS + 1))
    return np.ldexp(np.round(mantissa * steps) / steps, exponent)


MAGNITUDE_EDGES: F64 = _on_grid(
    10.0
    ** np.linspace(
        LOG_MAGNITUDE_RANGE[0],
        LOG_MAGNITUDE_RANGE[1],
        (LOG_MAGNITUDE_RANGE[1] - LOG_MAGNITUDE_RANGE[0]) * BINS_PER_DECADE + 1,
    )
)
"""Increasing magnitudes m_0 < … < m_72: 10^(k/8) for k = −40 … 32, each on the sketch's grid."""
SIGNED_LOG_EDGES: F64 = np.concatenate([-MAGNITUDE_EDGES[::-1], MAGNITUDE_EDGES])
"""The 146 bin boundaries −m_72 < … < −m_0 < m_0 < … < m_72, as documents list them. Bins are by
magnitude on each side of 0 (:func:`signed_log_bin`): the central bin holds |x| < m_0; the bin
beside it on the positive side m_0 ≤ x < m_1, on the negative side m_0 ≤ −x < m_1; the outer bins
|x| ≥ m_72."""
CENTRAL_BIN = MAGNITUDE_EDGES.size
"""Index of the central bin (|x| < m_0); 147 bins in all, 0 … 146."""

ROLLOUT_PROB_EDGES: tuple[float, ...] = (1e-4, 1e-3, 0.01, 0.1, 0.25, 0.5, 0.75, 0.9, 0.99, 0.999)
"""Rollout-probability buckets: [0, 1e-4), [1e-4, 1e-3), …, [0.999, 1]."""
_LOG_PROB_EDGES: F64 = np.log(np.array(ROLLOUT_PROB_EDGES))

LOG2_BUCKETS = 21
"""Position and length buckets ⌊log₂ t⌋ = 0 … 20 (the last one also holds anything longer)."""


def rollout_prob_bucket(rollout_log_probs: Floats) -> I64:
    """Index of the :data:`ROLLOUT_PROB_EDGES` bucket of each rollout log-prob: the number of edges
    p with log p ≤ x (:func:`laned_rollout_prob_bucket` with one lane).

    Example:
        >>> rollout_prob_bucket(np.log(np.array([1e-5, 0.3, 0.9995]))).tolist()
        [0, 5, 10]
    """
    return laned_rollout_prob_bucket(rollout_log_probs, 1)[0]


def laned_rollout_prob_bucket(
    rollout_log_probs: Floats, lanes: int, halves: Bool | None = None
) -> tuple[I64, I64]:
    """Each token's :data:`ROLLOUT_PROB_EDGES` bucket b (the number of edges p with log p ≤ x), as
    the cell b·lanes + (its lane) of a tally kept in ``lanes`` (1 or 4) interleaved lanes: with 4,
    consecutive tokens 4i … 4i + 3 take the four lanes. ``halves``: a flag per token that splits
    each bucket in two, cell (2b + flag)·lanes + lane. Also the tokens in each bucket, from the
    counts of tokens at or above each edge that the same ten comparisons give. Counted in bytes
    (an eighth of the memory traffic of 64-bit counts), laned four bytes at a time, widened once.

    The log-probs are compared as read (float16, 32 or 64), each edge rounded up to their type:
    a value x of that type is ≥ log p exactly when it is ≥ the least value of the type that is,
    so the buckets are those of float64 comparisons, without widening the tokens first.

    Example:
        >>> cells, tokens = laned_rollout_prob_bucket(np.log(np.array([1e-5, 0.3, 0.3])), 4)
        >>> (cells // 4).tolist(), len(set(cells % 4)), tokens.tolist()
        ([0, 5, 5], 3, [1, 0, 0, 0, 0, 2, 0, 0, 0, 0, 0])
    """
    if lanes not in (1, 4):
        raise ValueError("lanes must be 1 or 4")
    size = rollout_log_probs.size
    bucket = np.zeros(size + (-size) % 4, dtype=np.uint8)  # whole 4-byte words
    counted = bucket[:size]
    at_least = [size]  # tokens at or above each edge, the lowest "edge" being 0
    for edge in _edges_of(rollout_log_probs.dtype):
        above = rollout_log_probs >= edge
        at_least.append(int(np.count_nonzero(above)))
        counted += above
    at_least.append(0)
    if halves is not None:
        counted <<= np.uint8(1)
        counted |= halves.view(np.uint8)
    if lanes == 4:
        words = bucket.view(np.uint32)
        words <<= np.uint32(2)  # every byte ≤ 21 becomes 4 times it, < 2⁷: no bit leaves its byte
        words |= np.uint32(0x03020100)  # byte k of each word (in either byte order) gets a lane
    tokens: I64 = np.subtract(at_least[:-1], at_least[1:], dtype=np.int64)
    return counted.astype(np.int64), tokens


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


def signed_log_bin(values: F64) -> I64:
    """Index of the :data:`SIGNED_LOG_EDGES` bin of each value (0 … 146): with k the number of
    magnitudes m_i ≤ |x|, bin :data:`CENTRAL_BIN` + k for x ≥ 0 and :data:`CENTRAL_BIN` − k for
    x < 0 (NaN: the last bin). A binary search per value: used on per-row values; the histogram of
    token ℓ is read off the sketch's counts (:mod:`rcdiag.metrics.profile`).

    Example:
        >>> signed_log_bin(np.array([-1e9, -1.0, 0.0, 1.0, 1e9])).tolist()
        [0, 32, 73, 114, 146]
    """
    values = np.asarray(values, dtype=np.float64)
    below = np.searchsorted(MAGNITUDE_EDGES, np.abs(values), side="right")  # NaN: after every edge
    with np.errstate(invalid="ignore"):
        return np.where(values < 0, CENTRAL_BIN - below, CENTRAL_BIN + below)


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
