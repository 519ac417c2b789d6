"""Ragged token batches and vectorised per-row (segment) reductions.

A batch of B responses is stored flat: token arrays of length N = Σ lengths, and ``offsets`` of length
B + 1 with row i occupying ``[offsets[i], offsets[i+1])``. No padding is ever materialised, so padding
width cannot change a value (docs/metrics.md).
"""

from __future__ import annotations

from dataclasses import dataclass
from functools import cached_property

import numpy as np
from numpy.typing import NDArray

F64 = NDArray[np.float64]
Floats = NDArray[np.floating]
"""Log-probs as a dump holds them: float16, float32 or float64."""
I64 = NDArray[np.int64]
Bool = NDArray[np.bool_]


@dataclass(frozen=True)
class RaggedBatch:
    """B responses of per-token log-probs, flattened.

    Args:
        rollout: log π_rollout per token [N], as read (float16, float32 or float64: no copy is made;
            every computation on them takes the values to float64 first, which is exact).
        old: log π_train per token (verl's ``old_log_prob``) [N], as read.
        mask: response mask, bool [N]; values under ``False`` are ignored whatever they hold.
        offsets: int64 [B + 1], ``offsets[0] == 0`` and ``offsets[-1] == N``.
        steps: training step of each row, int64 [B].
        source: where the rows come from (a file path), for reports; may be empty.
        row_index: each row's position in ``source``, int64 [B], when known.
        uids: each row's prompt-group id (the dump's ``uid`` column), when read.
        lags: each row's policy lag (optimizer steps the rollout policy was behind the trainer,
            the dump's optional ``policy_lag`` column), int64 [B], when the dump records it.
        stream_rows: each row's position among all rows of the dump in reading order (files
            sorted by path, rows in file order, before any step selection), int64 [B], when
            known: the identity of a row whatever the batching or the split across workers.
    """

    rollout: Floats
    old: Floats
    mask: Bool
    offsets: I64
    steps: I64
    source: str = ""
    row_index: I64 | None = None
    uids: np.ndarray | None = None
    lags: I64 | None = None
    stream_rows: I64 | None = None

    def __post_init__(self) -> None:
        n = self.offsets[-1] if self.offsets.size else 0
        if self.offsets.size == 0 or self.offsets[0] != 0:
            raise ValueError("offsets must start at 0")
        if not (self.rollout.shape == self.old.shape == self.mask.shape == (n,)):
            raise ValueError("rollout, old and mask must be flat arrays of length offsets[-1]")
        if self.steps.shape != (self.offsets.size - 1,):
            raise ValueError("steps must have one entry per row")

    @cached_property
    def raw_log_ratio(self) -> F64:
        """ℓ = old − rollout at every position; NaN/inf possible where the mask is 0."""
        with np.errstate(invalid="ignore", over="ignore"):
            return np.subtract(self.old, self.rollout, dtype=np.float64)

    @cached_property
    def all_valid(self) -> bool:
        """Whether every position is a valid token (no padding, no masked token)."""
        return bool(self.mask.all())

    @cached_property
    def log_ratio(self) -> F64:
        """ℓ = old − rollout at valid tokens and exactly 0 elsewhere (garbage under the mask is
        dropped); computed once per batch for every consumer."""
        if self.all_valid:
            return self.raw_log_ratio
        return np.where(self.mask, self.raw_log_ratio, 0.0)

    @property
    def rows(self) -> int:
        return int(self.offsets.size - 1)

    @property
    def lengths(self) -> I64:
        return np.diff(self.offsets)

    def select_rows(self, keep: Bool) -> RaggedBatch:
        """The sub-batch of the rows where ``keep`` is true (order preserved)."""
        if keep.all():
            return self
        lengths = self.lengths
        token_keep = np.repeat(keep, lengths)
        offsets = np.zeros(int(keep.sum()) + 1, dtype=np.int64)
        np.cumsum(lengths[keep], out=offsets[1:])
        return RaggedBatch(
            rollout=self.rollout[token_keep],
            old=self.old[token_keep],
            mask=self.mask[token_keep],
            offsets=offsets,
            steps=self.steps[keep],
            source=self.source,
            row_index=None if self.row_index is None else self.row_index[keep],
            uids=None if self.uids is None else self.uids[keep],
            lags=None if self.lags is None else self.lags[keep],
            stream_rows=None if self.stream_rows is None else self.stream_rows[keep],
        )


def _nonempty_starts(offsets: I64) -> tuple[Bool, I64]:
    starts = offsets[:-1]
    nonempty = offsets[1:] > starts
    return nonempty, starts[nonempty]


def segment_sum(values: NDArray[np.generic], offsets: I64) -> F64:
    """Per-row sum Σ_{t ∈ row i} values[t]; an empty row sums to 0. A sum beyond the float64
    range is ±inf (and ∞ − ∞ is NaN), as verl's float64 arithmetic gives, without a warning.

    Example:
        >>> segment_sum(np.array([1.0, 2.0, 3.0]), np.array([0, 2, 2, 3]))
        array([3., 0., 3.])
    """
    out = np.zeros(offsets.size - 1, dtype=np.float64)
    nonempty, starts = _nonempty_starts(offsets)
    if starts.size:
        with np.errstate(over="ignore", invalid="ignore"):
            out[nonempty] = np.add.reduceat(values, starts, dtype=np.float64)
    return out


def segment_count(flags: Bool, offsets: I64) -> F64:
    """Per-row number of true flags. Flags are usually rare (a band's outliers, vetoed tokens):
    then each is located in its row (a search per flag) instead of reducing the whole batch.

    Example:
        >>> segment_count(np.array([True, False, False, True]), np.array([0, 2, 2, 4]))
        array([1., 0., 1.])
    """
    if np.count_nonzero(flags) * 16 >= flags.size:
        return segment_sum(flags, offsets)
    rows = np.searchsorted(offsets, np.flatnonzero(flags), side="right") - 1
    return np.bincount(rows, minlength=offsets.size - 1).astype(np.float64)


def segment_max(values: F64, offsets: I64, empty: float = -np.inf) -> F64:
    """Per-row maximum; an empty row gives ``empty``."""
    out = np.full(offsets.size - 1, empty, dtype=np.float64)
    nonempty, starts = _nonempty_starts(offsets)
    if starts.size:
        out[nonempty] = np.maximum.reduceat(values, starts)
    return out


def segment_min(values: F64, offsets: I64, empty: float = np.inf) -> F64:
    """Per-row minimum; an empty row gives ``empty``."""
    out = np.full(offsets.size - 1, empty, dtype=np.float64)
    nonempty, starts = _nonempty_starts(offsets)
    if starts.size:
        out[nonempty] = np.minimum.reduceat(values, starts)
    return out


def trimmed_lengths(mask: Bool) -> I64:
    """Each row's length once its trailing masked positions are dropped (0 for a row without a
    valid position): what a dump written from a padded [B, T] batch keeps of each row.

    Example:
        >>> trimmed_lengths(np.array([[1, 1, 0], [0, 0, 0], [1, 0, 1]], dtype=bool))
        array([2, 0, 3])
    """
    rows, width = mask.shape
    if not width:
        return np.zeros(rows, dtype=np.int64)
    last_valid = width - np.argmax(mask[:, ::-1], axis=1)
    return np.where(mask.any(axis=1), last_valid, 0).astype(np.int64)


def from_padded(rollout: F64, old: F64, mask: Bool, step: int = 0) -> RaggedBatch:
    """The batch of one step from padded [B, T] float64 log-probs and a bool mask, holding exactly
    the positions a dump of them keeps (:func:`trimmed_lengths`), so that every consumer sees what
    it would read back from that dump.

    Example:
        >>> b = from_padded(np.zeros((2, 3)), np.ones((2, 3)), np.array([[1, 0, 1], [1, 0, 0]], bool))
        >>> b.offsets.tolist(), b.mask.tolist()
        ([0, 3, 4], [True, False, True, True])
    """
    lengths = trimmed_lengths(mask)
    offsets = np.zeros(lengths.size + 1, dtype=np.int64)
    np.cumsum(lengths, out=offsets[1:])
    keep = np.arange(mask.shape[1])[None, :] < lengths[:, None]
    return RaggedBatch(
        rollout=rollout[keep],
        old=old[keep],
        mask=mask[keep],
        offsets=offsets,
        steps=np.full(lengths.size, step, dtype=np.int64),
    )
