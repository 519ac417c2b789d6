"""Where in a response the mismatch lives, and responses that end in padding marked valid
(docs/diagnosis.md).

Pure per-row sums of one :class:`~rcdiag.metrics.ragged.RaggedBatch`, summed per step with the
other evidence (:data:`POSITION_STATISTICS`):

* **By position**: Σ|ℓ| and the number of valid tokens in each bin of absolute response positions
  :data:`POSITION_EDGES` (position 0, 1, 2–3, 4–7, …, 64 and after). A mismatch that starts at a
  fixed position (an fp8 KV cache, chunked prefill) or that is huge on the first tokens and decays
  (the two sides scored the response after different contexts) shows in this profile; numerics
  spread evenly over it.
* **Padded ends**: the trailing (or leading) run of valid positions of a response where one column
  holds one value over and over (0.0, a pad token's score) while the other column does not. A
  generated token rarely has the very same log-probability as the tokens beside it, so a run of
  :data:`PAD_RUN` or more such positions where the columns differ by more than :data:`PAD_GAP`
  means positions that were never generated are counted in the mask: padding after the response,
  or the prompt before it (which the engine did not score). Per row: whether it ends or starts
  in such a run, the runs' length (``pad_tokens``, with ``lead_tokens`` of it at the start) and
  Σ|ℓ| over them.
"""

from __future__ import annotations

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
    "lead_tokens": "sum",
}
"""The per-row sums this module gives, and how they combine."""


def position_statistics(batch: RaggedBatch) -> dict[str, F64]:
    """Per-row sums of :data:`POSITION_STATISTICS` (module docstring)."""
    offsets = batch.offsets
    position = np.arange(offsets[-1], dtype=np.int64) - np.repeat(offsets[:-1], batch.lengths)
    bins = np.searchsorted(np.asarray(POSITION_EDGES), position, side="right") - 1
    abs_ell = np.abs(batch.log_ratio)  # 0 at invalid positions
    valid = batch.mask
    stats: dict[str, F64] = {}
    for index, edge in enumerate(POSITION_EDGES):
        inside = bins == index
        stats[f"pos_{edge}_abs"] = segment_sum(np.where(inside, abs_ell, 0.0), offsets)
        stats[f"pos_{edge}_n"] = segment_sum(inside & valid, offsets)
    stats.update(_padded_ends(batch, abs_ell))
    return stats


def _trailing_run(values: F64, valid: np.ndarray, offsets: I64) -> I64:
    """Per row: how many of its last valid positions hold the same value as its last one (0 for
    a row that does not end on a valid position)."""
    n = values.size
    rows = offsets.size - 1
    if n == 0:
        return np.zeros(rows, dtype=np.int64)
    starts = np.zeros(n, dtype=bool)
    starts[offsets[:-1][offsets[:-1] < n]] = True
    changed = starts.copy()
    changed[1:] |= values[1:] != values[:-1]
    changed |= ~valid  # an invalid position breaks a run
    index = np.arange(n, dtype=np.int64)
    run_start = np.maximum.accumulate(np.where(changed, index, 0))
    ends = offsets[1:] - 1
    nonempty = offsets[1:] > offsets[:-1]
    out = np.zeros(rows, dtype=np.int64)
    last = ends[nonempty]
    out[nonempty] = np.where(valid[last], last - run_start[last] + 1, 0)
    return out


def _padded_run(
    batch: RaggedBatch, abs_ell: F64, offsets: I64, order: slice
) -> I64:
    """Per row (in ``order`` of the flat arrays: forward for the tails, reversed for the starts):
    the length of its padded trailing run (0 when none)."""
    rollout, old, valid, abs_ell = (
        batch.rollout[order],
        batch.old[order],
        batch.mask[order],
        abs_ell[order],
    )
    rollout_run = _trailing_run(rollout, valid, offsets)
    old_run = _trailing_run(old, valid, offsets)
    # one column repeats over the run and the other does not repeat as long
    run = np.where(rollout_run >= old_run, rollout_run, old_run)
    other = np.minimum(rollout_run, old_run)
    candidate = (run >= PAD_RUN) & (other < run)
    length = np.where(candidate, run, 0)
    # Σ|ℓ| over each candidate run: the row's suffix of that length
    with np.errstate(invalid="ignore"):
        cumulative = np.concatenate([[0.0], np.cumsum(abs_ell)])
        ends = offsets[1:]
        run_abs = cumulative[ends] - cumulative[ends - length]
        padded = candidate & (run_abs > PAD_GAP * length)
    return np.where(padded, length, 0)


def _padded_ends(batch: RaggedBatch, abs_ell: F64) -> dict[str, F64]:
    offsets = batch.offsets
    tail = _padded_run(batch, abs_ell, offsets, slice(None))
    reversed_offsets = offsets[-1] - offsets[::-1]
    lead = _padded_run(batch, abs_ell, reversed_offsets, slice(None, None, -1))[::-1]
    lead = np.minimum(lead, np.diff(offsets) - tail)  # a row padded through: counted once
    with np.errstate(invalid="ignore"):
        cumulative = np.concatenate([[0.0], np.cumsum(abs_ell)])
        starts, ends = offsets[:-1], offsets[1:]
        padded_abs = (cumulative[ends] - cumulative[ends - tail]) + (
            cumulative[starts + lead] - cumulative[starts]
        )
    return {
        "pad_rows": ((tail > 0) | (lead > 0)).astype(np.float64),
        "pad_tokens": (tail + lead).astype(np.float64),
        "pad_abs": np.where(tail + lead > 0, padded_abs, 0.0),
        "lead_tokens": lead.astype(np.float64),
    }
