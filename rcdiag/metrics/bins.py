"""The fixed bins of the mismatch profile: signed log-spaced bins of ℓ, rollout-probability buckets
and log₂ position and length buckets (docs/report.md, "Where it lives").

Every index is computed arithmetically or with a few comparisons and equals a binary search over
the edges exactly (tested on and next to every edge).
"""

from __future__ import annotations

import numpy as np

from rcdiag.metrics.ragged import F64, I64

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


def rollout_prob_bucket(rollout_log_probs: F64) -> I64:
    """Index of the :data:`ROLLOUT_PROB_EDGES` bucket of each rollout log-prob: the number of edges
    p with log p ≤ x (ten comparisons, cheaper than a binary search per token; counted in bytes,
    an eighth of the memory traffic of 64-bit counts, then widened once)."""
    bucket = np.zeros(rollout_log_probs.size, dtype=np.uint8)
    for edge in _LOG_PROB_EDGES.tolist():
        bucket += rollout_log_probs >= edge
    return bucket.astype(np.int64)


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


_TOP = SIGNED_LOG_EDGES.size // 2 - 1  # index K of the largest magnitude edge M_K (72)
_BRACKETS: F64 = np.concatenate([[-np.inf], SIGNED_LOG_EDGES, [np.inf]])
"""Bin j holds _BRACKETS[j] ≤ x < _BRACKETS[j + 1]."""


def signed_log_bin(values: F64) -> I64:
    """Index of the :data:`SIGNED_LOG_EDGES` bin of each value (0 … 146): the number of edges ≤ x
    (NaN: the last bin).

    Computed from log₁₀|x| (the magnitude edges are M_k = 10^(−5 + k/8)), then corrected by one
    comparison with the true edges on each side, so a value on or next to an edge lands exactly
    where a binary search would put it, at a fraction of its cost.

    Example:
        >>> signed_log_bin(np.array([-1e9, -1.0, 0.0, 1.0, 1e9])).tolist()
        [0, 33, 73, 114, 146]
    """
    values = np.asarray(values, dtype=np.float64)
    with np.errstate(divide="ignore", invalid="ignore"):
        level = np.log10(np.abs(values))
    level -= LOG_MAGNITUDE_RANGE[0]
    level *= BINS_PER_DECADE
    np.clip(level, -1.0, _TOP, out=level)  # NaN stays NaN
    nan = np.isnan(level)
    if nan.any():
        level[nan] = _TOP
    k = np.floor(level).astype(np.int64)  # M_k ≤ |x| < M_(k+1), up to rounding
    # x ≥ 0: bin K + 2 + k; x < 0: bin K − k (written without a data-dependent branch)
    index = k + (_TOP + 2)
    k += 1
    k *= 2
    k *= values < 0
    index -= k
    np.clip(index, 0, SIGNED_LOG_EDGES.size, out=index)
    index += values >= np.take(_BRACKETS, index + 1)
    index -= values < np.take(_BRACKETS, index)
    np.minimum(index, SIGNED_LOG_EDGES.size, out=index)  # +inf is ≥ the last bracket too
    if nan.any():
        index[nan] = SIGNED_LOG_EDGES.size
    return index


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
