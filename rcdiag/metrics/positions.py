"""Where in a response the mismatch lives, and responses that end in padding marked valid
(docs/diagnosis.md).

Pure per-row sums of one :class:`~rcdiag.metrics.ragged.RaggedBatch`, summed per step with the
other evidence (:data:`POSITION_STATISTICS`):

* **By position**: Σ|ℓ| and the number of valid tokens in each bin of absolute response positions
  :data:`POSITION_EDGES` (position 0, 1, 2–3, 4–7, …, 64 and after). A mismatch that starts at a
  fixed position (an fp8 KV cache, chunked prefill) or that is huge on the first tokens and decays
  (the two sides scored the response after different contexts) shows in this profile; numerics
  spread evenly over it.
* **Padded tails**: the trailing run of valid positions of a response where one column holds one
  value over and over (0.0, a pad token's score) while the other column does not. A generated
  token rarely has the very same log-probability as the tokens before it, so a run of
  :data:`PAD_RUN` or more such positions where the columns differ by more than :data:`PAD_GAP`
  means positions that were never generated are counted in the mask. Per row: whether it ends in
  such a run, the run's length and Σ|ℓ| over it.
"""

from __future__ import annotations

import itertools

import numpy as np

from rcdiag.metrics.grouped import Kind
from rcdiag.metrics.ragged import F64, I64, RaggedBatch, segment_sum

POSITION_EDGES: tuple[int, ...] = (0, 1, 2, 4, 8, 16, 32, 64)
"""First position of each bin; the last bin runs to the end of the response."""
PAD_RUN = 4
"""A trailing run of this many repeated values in one column (and not the other) is padding…"""
PAD_GAP = 1.0
"""… when the two columns differ there by more than this on average (|ℓ|): a confident engine
may report log p = 0.0 for a few last tokens that the trainer scores just below 0."""

POSITION_STATISTICS: dict[str, Kind] = {
    **{f"pos_{edge}_abs": "sum" for edge in POSITION_EDGES},
    **{f"pos_{edge}_n": "sum" for edge in POSITION_EDGES},
    "pad_rows": "sum",
    "pad_tokens": "sum",
    "pad_abs": "sum",
}
"""The per-row sums this module gives, and how they combine."""


def position_statistics(batch: RaggedBatch) -> dict[str, F64]:
    """Per-row sums of :data:`POSITION_STATISTICS` (module docstring).

    The bins before the last come from a table of each row's first positions, the last bin and
    the padded tails from sums over slices of the rows: no array of a position per token, so a
    long response costs no more than its |ℓ|.
    """
    offsets, valid = batch.offsets, batch.mask
    abs_ell = np.abs(batch.log_ratio)  # 0 at invalid positions
    head = POSITION_EDGES[-1]
    width = int(min(head, np.diff(offsets).max(initial=0)))
    column = np.arange(width, dtype=np.int64)
    inside = column < np.diff(offsets)[:, None]
    index = np.where(inside, offsets[:-1, None] + column, 0)
    head_abs = np.where(inside, abs_ell[index], 0.0)
    head_valid = inside & valid[index]
    stats: dict[str, F64] = {}
    for low, high in itertools.pairwise(POSITION_EDGES):
        stats[f"pos_{low}_abs"] = head_abs[:, low:high].sum(axis=1)
        stats[f"pos_{low}_n"] = head_valid[:, low:high].sum(axis=1, dtype=np.float64)
    tails = _cut(offsets, np.minimum(offsets[:-1] + head, offsets[1:]))
    stats[f"pos_{head}_abs"] = segment_sum(abs_ell, tails)[1::2]
    stats[f"pos_{head}_n"] = segment_sum(valid, tails)[1::2]
    stats.update(_padded_tails(batch, abs_ell))
    return stats


def _cut(offsets: I64, at: I64) -> I64:
    """Segment offsets that cut each row ``[offsets[i], offsets[i + 1])`` at ``at[i]`` (within
    it): :func:`segment_sum` of them gives at its odd entries each row's sum over
    ``[at[i], offsets[i + 1])``."""
    out = np.empty(2 * offsets.size - 1, dtype=np.int64)
    out[0::2] = offsets
    out[1::2] = at
    return out


def _trailing_run(values: F64, valid: np.ndarray, offsets: I64) -> I64:
    """Per row: how many of its last valid positions hold the same value as its last one (0 for
    a row that does not end on a valid position).

    The run ends (going back from the last position) at the row's start, at a position whose
    value differs from the one before it, or at an invalid position, which it includes. Read
    from a table of each row's last positions, widened for the rows whose run is longer.
    """
    rows = offsets.size - 1
    out = np.zeros(rows, dtype=np.int64)
    lengths = np.diff(offsets)
    pending = np.flatnonzero(lengths > 0)
    width = 8  # most runs are one position long; longer ones widen the table
    while pending.size:
        length, start, last = lengths[pending], offsets[pending], offsets[pending + 1] - 1
        window = np.minimum(length, width)
        column = np.arange(int(window.max()), dtype=np.int64)
        inside = column < window[:, None]
        position = np.where(inside, last[:, None] - column, last[:, None])
        first = position == start[:, None]
        before = np.where(first, position, position - 1)
        with np.errstate(invalid="ignore"):
            changed = first | (values[position] != values[before]) | ~valid[position]
        changed &= inside
        found = changed.any(axis=1)
        run = np.argmax(changed, axis=1) + 1
        resolved = pending[found]
        out[resolved] = np.where(valid[last[found]], run[found], 0)
        pending = pending[~found]
        width *= 4
    return out


def _padded_tails(batch: RaggedBatch, abs_ell: F64) -> dict[str, F64]:
    offsets, valid = batch.offsets, batch.mask
    rollout_run = _trailing_run(batch.rollout, valid, offsets)
    old_run = _trailing_run(batch.old, valid, offsets)
    # one column repeats over the tail and the other does not repeat as long
    run = np.where(rollout_run >= old_run, rollout_run, old_run)
    other = np.minimum(rollout_run, old_run)
    candidate = (run >= PAD_RUN) & (other < run)
    length = np.where(candidate, run, 0)
    # Σ|ℓ| over each candidate tail: the row's suffix of that length
    with np.errstate(invalid="ignore"):
        ends = offsets[1:]
        tail_abs = segment_sum(abs_ell, _cut(offsets, ends - length))[1::2]
        padded = candidate & (tail_abs > PAD_GAP * length)
    length = np.where(padded, length, 0)
    return {
        "pad_rows": padded.astype(np.float64),
        "pad_tokens": length.astype(np.float64),
        "pad_abs": np.where(padded, tail_abs, 0.0),
    }
